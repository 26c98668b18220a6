"""The home and the daemon: `init`, `serve`, `demo`, `doctor`, `usage`, and `event send|list`."""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from agentd import config
from agentd.cli import init_text
from agentd.cli.aio import run_apart
from agentd.cli.root import (
    JsonFlag,
    Opt,
    app,
    console_logging,
    daemon_pid,
    emit,
    open_store,
    paths_of,
)
from agentd.config import Paths, ScriptedModel
from agentd.db.sqlite import backup as backups
from agentd.errors import ConfigError, StateError, UsageError
from agentd.operator import home as operator_home
from agentd.operator import runs
from agentd.text import screen
from agentd.views import records


def _template() -> str:
    """config.example.toml with its checkin.tz set to this machine's zone, so the default quiet
    hours (22:00-08:00) are the operator's night, not UTC's."""
    resource = importlib.resources.files("agentd") / "config.example.toml"
    text = resource.read_text() if resource.is_file() else init_text.FALLBACK_CONFIG
    return init_text.in_zone(text, init_text.machine_zone())


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read or change (0600), also when it already existed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def _keep_copy(path: Path) -> Path:
    """Copy `path` to the first free `NAME.bak`, `NAME.bak.1`, … (0600) before it is replaced."""
    n = 0
    while (bak := path.with_name(f"{path.name}.bak{f'.{n}' if n else ''}")).exists():
        n += 1
    _write_private(bak, path.read_text())
    return bak


def _write_config(paths: Paths, force: bool) -> list[str]:
    """config.toml from the template, unless one is there (then it is kept, or with `force`
    replaced after a .bak copy). Returns what happened, one line each."""
    if not paths.config.exists():
        _write_private(paths.config, _template())
        return [f"created {paths.config}"]
    if not force:
        return [
            f"kept {paths.config} (`init --force` replaces it with the template, keeping a .bak)"
        ]
    bak = _keep_copy(paths.config)
    _write_private(paths.config, _template())
    return [f"saved {paths.config} as {bak}", f"created {paths.config}"]


def _write_home(paths: Paths, force: bool = False) -> tuple[list[str], str | None]:
    """Write config.toml (a hand-written one is kept), a placeholder replies file and a migrated
    database; returns what happened, one line each, and a problem with the config, if any.

    Only the owner may read what agentd creates here (the database keeps observations, answers and
    raw model replies): a new home is 0700, its files 0600 (the store creates the database so).
    """
    try:
        paths.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        done = _write_config(paths, force)
    except OSError as e:
        raise StateError(f"{paths.home}: cannot create the home: {e.strerror or e}") from None
    problem = None
    models: list[config.ModelConfig] = []
    try:
        models = list(config.load(paths.config).models.values())
    except ConfigError as e:  # a hand-written config: the database is still made; doctor shows it
        models, problem = [], str(e)
    for model in models:
        if not isinstance(model, ScriptedModel) or model.replies.exists():
            continue
        if model.replies.parent == paths.home:
            _write_private(model.replies, init_text.PLACEHOLDER_REPLIES)
            done.append(f"created {model.replies}")
    existed = paths.db.exists() and paths.db.stat().st_size > 0
    store = operator_home.open_store(paths.db)
    try:
        store.write(lambda c: None)  # the first write migrates (an empty file included)
    finally:
        store.close()
    made = "created" if (store.created if store.backend.shared else not existed) else "kept"
    done.append(f"{made} {init_text.database_said(store.backend, paths.db, paths.config)}")
    return done, problem


@app.command("init")
def init_cmd(
    ctx: typer.Context,
    force: Annotated[
        bool, Opt("--force", help="Replace an existing config.toml (kept as config.toml.bak).")
    ] = False,
) -> None:
    """Create a home: config.toml, a placeholder replies.json and the database.

    A config.toml already there (written by hand) is kept, and the database is made beside it;
    --force replaces it with the template and keeps the old one as config.toml.bak. The database
    and an existing replies file are always kept.

    Example: agentd --home ~/agentd-try init
    """
    paths = paths_of(ctx)
    done, problem = _write_home(paths, force)
    for line in done:
        typer.echo(screen(line))
    if problem is not None:
        typer.echo(screen(f"note: the config does not load yet: {problem}"), err=True)
    if paths.home.stat().st_mode & 0o077:  # an existing home: its mode is the operator's choice
        typer.echo(
            f"note: other users may open {paths.home}, which holds what the agents saw and were "
            f"told; `chmod 700 {paths.home}` makes it private",
            err=True,
        )
    prefix = "agentd" if paths.home == config.default_home() else f"agentd --home {paths.home}"
    typer.echo(f"next: edit {paths.config}, check it with `{prefix} doctor`, then `{prefix} serve`")


MAX_CLOCK_SPEED = 1_000_000.0


def check_speed(speed: float | None) -> float | None:
    if speed is not None and not 1 <= speed <= MAX_CLOCK_SPEED:
        raise UsageError(
            f"--clock-speed {speed:g}: give a factor from 1 to {MAX_CLOCK_SPEED:g}, "
            "e.g. --clock-speed 3600 (one simulated hour per second)"
        )
    return speed


CLOCK_START_EXAMPLE = "--clock-speed 3600 --clock-start 2030-01-01T09:00:00Z"
CLOCK_START_YEARS = (1971, 2999)  # a simulated clock started there stays in datetime's range


def check_start(start: str | None, speed: float | None) -> float | None:
    """`--clock-start ISO` as unix seconds (a time without an offset is UTC)."""
    if start is None:
        return None
    if speed is None:
        raise UsageError(
            f"--clock-start {start}: needs --clock-speed (the simulated clock it starts), e.g. "
            f"{CLOCK_START_EXAMPLE}; --clock-speed 1 runs at the wall's pace from that instant"
        )
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(start.strip())
    except ValueError:
        raise UsageError(
            f"--clock-start {start!r}: not an ISO 8601 date or time; give e.g. 2030-01-01 or "
            f"2030-01-01T09:00:00Z ({CLOCK_START_EXAMPLE})"
        ) from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    # Every view prints the home's time: one near year 9999 (or before 1970) leaves the home's
    # dates out of Python's range as its clock runs on.
    if not CLOCK_START_YEARS[0] <= when.astimezone(UTC).year <= CLOCK_START_YEARS[1]:
        raise UsageError(
            f"--clock-start {start!r}: give a time from {CLOCK_START_YEARS[0]} to "
            f"{CLOCK_START_YEARS[1]} ({CLOCK_START_EXAMPLE})"
        )
    return when.timestamp()


@app.command("reload")
def reload_cmd(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Check config.toml, ask the daemon serving this home to reload it, and say how it went.

    A config that does not validate is refused here (exit 2) and the daemon keeps the one it
    runs. The daemon answers over its socket: applied (exit 0), or refused and why (exit 1,
    the config it ran before is kept). Then it warns about changed settings that apply only at
    a restart ([daemon], [api], [web] on a new port) and about checks `agentd doctor` would
    FAIL under the new config: every one but its looks at HTTP, command and MCP sources (they
    need the network or a child process; run `agentd doctor`). A file_tail source's log is
    read, so a missing or unreadable file is warned of. A daemon that cannot be asked on its
    socket gets SIGHUP (the pid from the home's lock, never a stale one). Under systemd,
    `systemctl reload agentd` signals.

    \b
    Example:
      agentd --home /var/lib/agentd reload
    """
    from agentd.operator import control  # a socket and a few names: nothing heavy

    paths = paths_of(ctx)
    config.load(paths.config)  # raises ConfigError (file:line) before anything is asked
    pid = daemon_pid(paths)
    if pid is None:
        raise StateError(f"no daemon serves {paths.home}; the config applies when it starts")
    try:
        verdict = control.ask_reload(paths)
    except TimeoutError:
        raise StateError(
            f"the daemon (pid {pid if pid > 0 else 'unknown'}) did not answer within "
            f"{control.RELOAD_TIMEOUT_S:g}s; whether it reloaded, its log says "
            "(config.reloaded or config.reload_failed); `agentd status` says if it is stuck"
        ) from None
    if verdict is None:  # no socket to ask (starting, or one from before the question)
        _signal_reload(paths, pid)
        return
    warnings = _reload_warnings(ctx, paths, pid, verdict)
    if as_json:
        emit(True, {**verdict, "warnings": warnings}, str)
    elif verdict.get("applied"):
        typer.echo(f"reloaded: the daemon (pid {verdict.get('pid', pid)}) runs {paths.config}")
    for line in [] if as_json else warnings:
        typer.echo(screen(f"warning: {line}"), err=True)
    if not verdict.get("applied"):
        if as_json:
            raise typer.Exit(StateError.exit_code)
        note = f"; {verdict['note']}" if verdict.get("note") else ""
        raise StateError(f"reload refused: {verdict.get('error')}{note}")


def _signal_reload(paths: Paths, pid: int) -> None:
    if pid <= 0:
        raise StateError(f"a daemon serves {paths.home} but its pid is unknown; restart it")
    try:
        os.kill(pid, signal.SIGHUP)
    except PermissionError:
        raise StateError(
            f"the daemon (pid {pid}) runs as another user: run this as that user, or "
            "`sudo systemctl reload agentd`"
        ) from None
    typer.echo(
        f"reload requested (pid {pid}) by SIGHUP: the daemon did not answer on {paths.api_sock}; "
        "its log says config.reloaded, or why not"
    )


def _reload_warnings(
    ctx: typer.Context, paths: Paths, pid: int, verdict: dict[str, object]
) -> list[str]:
    """After an applied reload: settings waiting for a restart, and every check doctor would
    FAIL now (of sources, only the local reads of `doctor.LOCAL_SOURCES`: no probe here)."""
    if not verdict.get("applied"):
        return []
    restart = verdict.get("restart")
    lines = []
    if isinstance(restart, list) and restart:
        lines.append(
            f"changed settings apply only at the next start: {', '.join(map(str, restart))} "
            "(`systemctl restart agentd`, or stop and start `agentd serve`)"
        )
    from agentd.cli import doctor  # the model adapters and source classes: only this needs them

    console_logging(ctx)
    report = doctor.examine(paths, pid)
    checks = report.checks
    if (cfg := report.config) is not None:
        checks = checks + run_apart(lambda: doctor.check_sources(cfg, doctor.LOCAL_SOURCES))
    failing = [c for c in checks if c.required and not c.ok]
    lines += [f"doctor would FAIL {c.name}: {c.message}" for c in failing]
    return lines


@app.command("backup")
def backup_cmd(
    ctx: typer.Context,
    target: Annotated[
        Path, typer.Argument(metavar="PATH", help="The backup file to write (not a folder).")
    ],
    force: Annotated[bool, Opt("--force", help="Replace PATH if it exists.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Copy the database to PATH, consistent while the daemon runs (SQLite's online backup).

    The copy is one self-contained file, checked with `PRAGMA quick_check` before it takes its
    name; an existing PATH is refused unless --force. Restore: docs/systemd.md, "Backups and restore".

    \b
    Example:
      agentd --home /var/lib/agentd backup /var/backups/agentd/agentd-$(date +%F).db
    """
    paths = paths_of(ctx)
    live = sys.stderr.isatty() and not as_json

    def progress(copied: int, total: int) -> None:
        if live:
            typer.echo(f"\rcopied {copied} of {total} pages", nl=False, err=True)

    made = backups.backup(paths.db, target.expanduser(), force=force, progress=progress)
    if live:
        typer.echo("", err=True)
    counts = ", ".join(f"{n} {table}" for table, n in made.counts.items())
    emit(
        as_json,
        made,
        lambda: (
            f"backed up {paths.db} to {made.path}: {made.bytes / 1e6:.1f} MB "
            f"({made.pages} pages) in {made.seconds:.2f} s; quick_check ok; schema version "
            f"{made.schema_version}; {counts}"
        ),
    )


# ── demo: agentd/demo/ops.py provides main(home, yes, recover) -> exit code ──────────────────────
@app.command("demo")
def demo_cmd(
    ctx: typer.Context,
    yes: Annotated[bool, Opt("--yes", help="Approve through the inbox automatically.")] = False,
    recover: Annotated[
        bool, Opt("--recover", help="The service heals while the approval waits: it is withdrawn.")
    ] = False,
    home: Annotated[
        Path | None, Opt(metavar="PATH", help="Use (and keep) this home, not a temp dir.")
    ] = None,
    keep: Annotated[
        bool, Opt("--keep", help="Keep the temporary home at the end, to explore it.")
    ] = False,
    build: Annotated[
        bool,
        Opt("--build", help="Then build the incident report from the run's journal (inner loop)."),
    ] = False,
) -> None:
    """Watch a background agent keep a real service healthy, in a throw-away home.

    A demo checkout service gets a bad deploy; the agent notices, investigates, and asks you to
    approve a rollback. Its processes stop at the end, on Ctrl-C, SIGTERM or SIGHUP, and its
    temporary home is removed unless --keep. Example: agentd demo --yes --keep
    (or: agentd demo --recover). With --build, the inner loop follows: the incident report is
    drafted from the run's journal, judged, revised and shown with its verdicts.
    """
    try:
        demo = importlib.import_module("agentd.demo.ops")  # lazily: the demo is optional
    except ModuleNotFoundError as e:
        if e.name != "agentd.demo.ops":
            raise
        raise StateError("the demo is not part of this build") from None
    console_logging(ctx)
    raise typer.Exit(int(demo.main(home, yes, recover, keep=keep, build=build)))


@app.command("usage")
def usage_cmd(
    ctx: typer.Context,
    days: Annotated[int, Opt(min=1, help="How many UTC days back, today included.")] = 30,
    as_json: JsonFlag = False,
) -> None:
    """Model calls, tokens and cost by goal, model and day.

    Costs come from [prices] in config.toml. Example: agentd usage --days 7 --json
    """
    with open_store(ctx) as store:
        since = operator_home.now(store).timestamp() - days * 86400  # the home's days
        rows = runs.usage(store, since)
    emit(as_json, rows, lambda: records.usage_table(rows))


# ── doctor ───────────────────────────────────────────────────────────────────────────────────
@app.command("doctor")
def doctor_cmd(
    ctx: typer.Context,
    ping: Annotated[bool, Opt("--ping", help="Also ask each model for a tiny reply.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check what would fail at run time: config, database, daemon, models and their API keys
    (never printed), each source looked at once, the programs actions run, triggers, goals.

    Exits 0 when every required check passes, 2 when the config is invalid, else 1; a stopped
    daemon, a service that is down and a config not yet reloaded are only reported.
    Example: agentd doctor --ping
    """
    from agentd.cli import doctor  # the model adapters and source probes: only doctor uses them

    console_logging(ctx)
    paths = paths_of(ctx)
    report = doctor.examine(paths, daemon_pid(paths))
    report = asyncio.run(doctor.probe(report, with_ping=ping))
    emit(as_json, report.as_json(), lambda: records.checks_text(report.checks))
    raise typer.Exit(report.exit_code)
