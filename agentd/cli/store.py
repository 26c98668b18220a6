"""`agentd store copy --to URL`: copy a home's state from its SQLite file into an empty PostgreSQL
database (issue 21), a line per table as it is verified, a summary, and what to do next. The copy
and its refusals are agentd/operator/store_copy.py; psycopg is imported inside the command only.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentd.cli.root import JsonFlag, Opt, app, emit, paths_of, sub_app
from agentd.errors import UsageError

if TYPE_CHECKING:
    from agentd.config import Paths
    from agentd.operator.store_copy import CopyReport, TableCopy

store_app = sub_app(help="Where the home keeps its state: copy it into PostgreSQL.")
app.add_typer(store_app, name="store")

DEFAULT_ENV = "AGENTD_STORE_URL"


@store_app.command("copy")
def copy_cmd(
    ctx: typer.Context,
    to: Annotated[
        str | None,
        Opt(
            "--to", metavar="URL", help="The empty PostgreSQL database: postgresql://user@host/db."
        ),
    ] = None,
    to_env: Annotated[
        str | None,
        Opt(
            "--to-env",
            metavar="NAME",
            help="Read the URL from this environment variable (keeps a password off the command"
            " line); the next steps then name it as [store] url_env.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Copy this home's state (goals, runs and their journals, inbox, schedules, check-ins, outbox,
    artifacts, memory: every table agentd keeps) from its SQLite file into an empty PostgreSQL
    database, then check that every table has the same rows on both sides (a count and a
    checksum each) before committing. All or nothing: one transaction on the target.

    Refuses, writing nothing, while a daemon serves the home (stop it: the copy must hold its last
    writes; none can start until the copy is done), when the target database holds any rows or
    tables of its own, when the home already uses PostgreSQL, and when the SQLite file's schema
    is older than this agentd's: a copy never changes its source, so bring it up to date first
    with `agentd init` (it keeps the config and the data) or one start of `agentd serve`. The
    target is migrated first. Not copied: the live daemons' heartbeats (`daemons`) and each
    engine's own bookkeeping. The SQLite file is only read: keep it as a backup.

    Then add [store] url_env = "NAME" (or url = "postgresql://…") to config.toml and start the
    daemon again; the command prints those lines.

    \b
    Example:
      export AGENTD_STORE_URL=postgresql://agentd@db.example/agentd
      agentd store copy --to-env AGENTD_STORE_URL
    """
    from agentd.operator import store_copy

    url, env = _target(to, to_env)
    paths = paths_of(ctx)
    shown: list[str] = []

    def progress(done: TableCopy) -> None:
        if not shown:  # once the refusals are behind: a refused copy prints its error alone
            shown.append(done.table)
            typer.echo(f"copying {paths.db} into {store_copy.label(url)}")
        _progress(done)

    report = store_copy.copy_home(paths, url, None if as_json else progress)
    data = _as_json(report, paths, url, env)
    emit(as_json, data, lambda: _summary(report, data))


def _target(to: str | None, to_env: str | None) -> tuple[str, str | None]:
    if (to is None) == (to_env is None):
        raise UsageError(
            "name the target database once: --to postgresql://user@host/db, or --to-env NAME"
            " (a variable holding the URL)"
        )
    if to is not None:
        return to, None
    assert to_env is not None
    url = os.environ.get(to_env, "")
    if not url:
        raise UsageError(
            f"--to-env {to_env}: no such variable is set (export {to_env}=postgresql://…)"
        )
    return url, to_env


def _progress(done: TableCopy) -> None:
    mark = "ok" if done.ok else "MISMATCH"
    rows = "row" if done.rows == 1 else "rows"
    typer.echo(
        f"  {done.table:<14} {done.rows:>9,} {rows:<4} → {done.target_rows:>9,}"
        f"  checksum {done.checksum[:12]}  {mark}"
    )


def _config_lines(url: str, env: str | None) -> list[str]:
    """The [store] lines to add to config.toml: url_env unless the URL can sit in the file."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    password = parts.password is not None or "password" in urllib.parse.parse_qs(parts.query)
    if env is not None or password:
        return ["[store]", f"url_env = {json.dumps(env or DEFAULT_ENV)}"]
    return ["[store]", f"url = {json.dumps(url)}"]


def _as_json(report: CopyReport, paths: Paths, url: str, env: str | None) -> dict[str, Any]:
    lines = _config_lines(url, env)
    return {
        "source": report.source,
        "target": report.target,
        "schema": report.schema,
        "tables": [
            {
                "table": t.table,
                "rows": t.rows,
                "target_rows": t.target_rows,
                "checksum": t.checksum,
                "target_checksum": t.target_checksum,
                "ok": t.ok,
            }
            for t in report.tables
        ],
        "rows": report.rows,
        "skipped": report.skipped,
        "sequences": report.sequences,
        "seconds": round(report.seconds, 3),
        "config": {"file": str(paths.config), "add": "\n".join(lines)},
        "backup": str(paths.db),
        "url_env": env or (DEFAULT_ENV if "url_env" in lines[1] else None),
    }


def _summary(report: CopyReport, data: dict[str, Any]) -> str:
    tables = len(report.tables)
    out = [
        f"copied {tables} tables, {report.rows:,} rows in {report.seconds:.1f} s (schema"
        f" {report.schema}): counts and checksums match on both sides",
    ]
    if report.skipped:
        out.append("not copied: " + "; ".join(f"{t} ({why})" for t, why in report.skipped.items()))
    env = data["url_env"]
    add = "\n".join(f"       {line}" for line in data["config"]["add"].splitlines())
    out += ["", "next:", f"  1. add to {data['config']['file']}:", add]
    if env is not None:
        out.append(f"     and give the daemon the URL: export {env}='postgresql://…' (or a systemd")
        out.append(f"     credential named {env}: LoadCredential={env}:/path/to/file)")
    out += [
        "  2. start the daemon again (`agentd serve`, or `systemctl restart agentd`): from then on",
        "     every command of this home reads and writes PostgreSQL",
        f"  3. keep {data['backup']} as a backup: agentd no longer reads or writes it",
    ]
    return "\n".join(out)
