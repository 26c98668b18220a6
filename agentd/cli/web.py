"""`agentd web`: the web inbox's login URL (and how to reach it through an SSH tunnel), checked
against what the running daemon actually serves."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from agentd.cli import doctor_reach
from agentd.cli.root import JsonFlag, Opt, app, config_of, emit, paths_of
from agentd.daemon import serve as daemon
from agentd.errors import AgentdError
from agentd.web import auth

ENABLE = (
    "add to config.toml\n\n  [web]\n  enabled = true\n\n"
    "and restart `agentd serve` (a reload opens no listener)"
)


@app.command("web")
def web_cmd(
    ctx: typer.Context,
    token_only: Annotated[
        bool, Opt("--token", help="Print only the token (the JSON API's Bearer token).")
    ] = False,
    rotate: Annotated[
        bool,
        Opt(
            "--rotate",
            help="Replace the token first: every browser session and Bearer client (an MCP "
            "client of /mcp included) must use the new one; a running daemon takes it at its "
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
    """
    paths = paths_of(ctx)
    cfg = config_of(ctx)
    if rotate:
        auth.rotate(paths.api_token)
        typer.echo(
            "the token was replaced: sessions logged in with the old one have ended", err=True
        )
    if token_only:
        typer.echo(auth.token(paths.api_token))
        return
    configured = cfg.web.port(cfg.api) if cfg.web.enabled else None
    pid = daemon.daemon_pid(paths)
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


def _listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port (not us: no daemon of this home runs)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
