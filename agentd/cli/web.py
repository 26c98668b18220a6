"""`agentd web`: the web inbox's login URL (and how to reach it through an SSH tunnel), checked
against what the running daemon actually serves; `agentd web sessions`: the logins that are live,
and revoking them."""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Annotated

import typer

from agentd.cli import doctor_reach
from agentd.cli.root import JsonFlag, Opt, app, config_of, daemon_pid, emit, open_store, paths_of
from agentd.config import Paths
from agentd.errors import AgentdError, NotFound, UsageError
from agentd.models import from_ts, utcnow
from agentd.operator import sessions
from agentd.views.tables import table
from agentd.views.times import relative, stamp
from agentd.web import auth

ENABLE = (
    "add to config.toml\n\n  [web]\n  enabled = true\n\n"
    "and restart `agentd serve` (a reload opens no listener)"
)


web_app = typer.Typer(
    invoke_without_command=True, no_args_is_help=False, rich_markup_mode=None, add_completion=False
)
app.add_typer(web_app, name="web")


@web_app.callback()
def web_cmd(
    ctx: typer.Context,
    token_only: Annotated[
        bool, Opt("--token", help="Print only the token (the JSON API's Bearer token).")
    ] = False,
    rotate: Annotated[
        bool,
        Opt(
            "--rotate",
            help="Replace the token first: every web session ends, and every Bearer client (an "
            "MCP client of /mcp included) must use the new one; a running daemon takes it at its "
            "next request.",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Print the web inbox's login URL. The pages are served by `agentd serve` on 127.0.0.1
    when `[web] enabled = true`; the token lives in `api.token` in the home (0600): whoever can
    read it can approve actions. With a daemon running, the URL is the port it listens on (asked
    over its unix socket), and an inbox it does not serve is an error, never a URL to whatever
    else holds the port.

    \b
    From another machine, through an SSH tunnel:
      ssh -N -L 8765:127.0.0.1:8765 you@server     then open the URL on your machine

    `agentd web sessions` lists the browsers logged in, and ends them (`--revoke`).
    """
    if ctx.invoked_subcommand is not None:
        if token_only or rotate or as_json:
            raise UsageError(
                "--token, --rotate and --json of `agentd web` take no command after them; for "
                "the sessions as JSON: `agentd web sessions --json`"
            )
        return
    paths = paths_of(ctx)
    cfg = config_of(ctx)
    if rotate:
        auth.rotate(paths.api_token)
        ended = _end_all(ctx, paths)
        typer.echo(f"the token was replaced: {ended} web session(s) logged in with the old one "
                   "have ended", err=True)  # fmt: skip
    if token_only:
        typer.echo(auth.token(paths.api_token))
        return
    configured = cfg.web.port(cfg.api) if cfg.web.enabled else None
    pid = daemon_pid(paths)
    serving = doctor_reach.web_served(paths, pid)
    notes: list[str] = []
    if isinstance(serving, dict):
        port = serving.get("port") if serving.get("web") else None
        if port is None:
            failed = serving.get("port_failed")
            if failed:
                why = (
                    f"it could not listen on 127.0.0.1:{failed} (another program holds the "
                    "port? its log says api.port_failed); free the port or pick another "
                    "([api] port = N), then restart `agentd serve`"
                )
            elif configured is not None:
                why = "it started before [web] was enabled: restart `agentd serve`"
            else:
                why = ENABLE
            why = f"the daemon (pid {pid}) serves no web inbox: {why}"
            raise AgentdError(why)
        if configured != port:
            notes.append(
                f"the daemon listens on {port}; the config on disk says "
                f"{configured if configured is not None else 'no web inbox'} (restart to apply)"
            )
    elif configured is None:
        raise AgentdError(f"the web inbox is off: {ENABLE}")
    else:
        port = configured
        if pid is None and _listening(port):
            raise AgentdError(
                f"no daemon serves this home, and another program listens on 127.0.0.1:{port}: "
                "a login there would hand it the token; free the port or set [api] port = N, "
                "then start `agentd serve`"
            )
        if pid is None:
            notes.append("no daemon serves this home; start `agentd serve` first")
        else:
            notes.append(f"could not ask the daemon (pid {pid}) which port it serves")
    url = f"http://127.0.0.1:{port}/login?token={auth.token(paths.api_token)}"
    tunnel = f"ssh -N -L {port}:127.0.0.1:{port} {socket.gethostname()}"
    data = {"url": url, "port": port, "served": isinstance(serving, dict), "daemon_pid": pid,
            "tunnel": tunnel, "notes": notes}  # fmt: skip
    if as_json:
        emit(True, data, str)
        return
    typer.echo(url)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(f"from another machine: {tunnel}  (then open the URL there)", err=True)


def _end_all(ctx: typer.Context, paths: Paths) -> int:
    """End every web session (they would fail anyway: each is bound to the old token)."""
    if not paths.db.exists():
        return 0
    with open_store(ctx) as store:
        return sessions.end(store, "rotated")


@web_app.command("sessions")
def sessions_cmd(
    ctx: typer.Context,
    revoke: Annotated[
        list[str] | None,
        Opt("--revoke", metavar="ID|all", help="End this session (repeatable), or all of them."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the browsers logged in to the web inbox, or end their sessions.

    One session per login: when it began, when it was last seen (to within five minutes), when
    it expires unless used again (12 hours after it was last seen, and never more than 7 days
    after the login) and the browser it came from. Logging out ends one; so do --revoke, a new
    token (`agentd web --rotate`) and time. A browser whose session ended is asked to log in
    again at its next request. --json gives `expires_at` (that end) and `login_expires_at`."""
    paths = paths_of(ctx)
    token = auth.token(paths.api_token) if paths.api_token.exists() else None
    with open_store(ctx) as store:
        live = sessions.live(store, token)
        if revoke:
            ids = None if "all" in revoke else _ids(revoke, {s.session_id for s in live})
            ended = sessions.revoke(store, ids)
            emit(as_json, {"ended": ended}, lambda: f"ended {ended} web session(s)")
            return
    now = utcnow()
    rows = [
        (s.session_id, relative(_dt(s.created_at), now), relative(_dt(s.seen_at), now),
         stamp(_dt(sessions.ends_at(s)), now), s.client or "-")
        for s in live
    ]  # fmt: skip
    data = [{"session_id": s.session_id, "created_at": _dt(s.created_at), "seen_at": _dt(s.seen_at),
             "expires_at": _dt(sessions.ends_at(s)), "login_expires_at": _dt(s.expires_at),
             "client": s.client} for s in live]  # fmt: skip
    empty = "no web sessions: nobody is logged in to the web inbox"
    headers = ("id", "logged in", "seen", "expires", "browser")
    emit(as_json, data, lambda: table(headers, rows, {"browser": 60}, empty))


def _ids(given: list[str], live: set[int]) -> list[int]:
    ids = []
    for text in given:
        if not text.isdigit():
            raise UsageError(f"--revoke {text!r}: give a session id (`agentd web sessions`) or all")
        if int(text) not in live:
            raise NotFound(f"web session {text} is not live (`agentd web sessions` lists them)")
        ids.append(int(text))
    return ids


def _dt(ts: float) -> datetime:
    at = from_ts(ts)
    assert at is not None
    return at


def _listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port (not us: no daemon of this home runs)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
