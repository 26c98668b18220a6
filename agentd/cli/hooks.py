"""`agentd hooks`: each inbound webhook (`[hooks.NAME]`) with its URL, the events it recorded (the
database) and its deliveries accepted and refused (and why), from the running daemon or, when none
answers, as last written (kept across restarts); `--snippet NAME` prints the sender's side."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from agentd import config
from agentd.cli.root import JsonFlag, Opt, app, emit, open_store, paths_of
from agentd.errors import UsageError
from agentd.operator import control, hook_counts
from agentd.operator import events as operator_events
from agentd.operator import home as operator_home
from agentd.views import hooks as hook_views


@app.command("hooks")
def hooks(
    ctx: typer.Context,
    snippet: Annotated[
        str | None, Opt(metavar="NAME", help="Print the sender's configuration for hook NAME.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the inbound webhooks: URL, events recorded, deliveries accepted and refused (kept
    across restarts), and the last one.

    \b
    Example:
      agentd hooks
      agentd hooks --snippet alerts   # the Alertmanager receiver to paste
    """
    paths = paths_of(ctx)
    cfg = config.load(paths.config)
    port = cfg.api.listen_port(cfg.web)
    if snippet is not None:
        hook = cfg.hooks.get(snippet)
        if hook is None:
            known = ", ".join(sorted(cfg.hooks)) or "none"
            raise UsageError(f"no [hooks.{snippet}] in {paths.config} (hooks: {known})")
        url = hook_views.url_of(port, snippet) or f"http://127.0.0.1:PORT/hooks/{snippet}"
        typer.echo(hook_views.snippet(snippet, hook, url))
        return
    with open_store(ctx) as store:
        recorded = operator_events.hook_deliveries(store)
        kept = hook_counts.read(store)
        now = operator_home.now(store)
    asked = control.call(paths, "GET", "/api/hooks", control.SEES_TIMEOUT_S)
    seen: dict[str, Any] = asked[1].get("hooks", {}) if asked and asked[0] == 200 else {}
    if asked is None:  # the counts as the daemon last wrote them
        seen = {n: {**k, "refused": sum((k.get("refused_by") or {}).values())}
                for n, k in kept.items()}  # fmt: skip
    rows = []
    for name, hook in sorted(cfg.hooks.items()):
        count, last = recorded.get(f"hook:{name}", (0, None))
        daemon = seen.get(name, {})
        at = daemon.get("last_at") if daemon else None
        rows.append({
            "name": name, "type": hook.type, "url": hook_views.url_of(port, name),
            "recorded": count, "last_recorded_at": last,
            "accepted": None if daemon is None else daemon.get("accepted", 0),
            "refused": None if daemon is None else daemon.get("refused", 0),
            "refused_by": None if daemon is None else daemon.get("refused_by", {}),
            "last_at": datetime.fromtimestamp(at, UTC) if at else last,
            "last": (daemon or {}).get("last") or ("accepted" if last else ""),
        })  # fmt: skip
    emit(as_json, rows, lambda: hook_views.hooks_table(rows, now))
    if asked is None and rows:
        typer.echo(
            "note: no daemon answered: counts as it last wrote them (refusals of its last "
            "few seconds may be missing)",
            err=True,
        )
