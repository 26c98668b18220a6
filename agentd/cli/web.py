"""`agentd web`: the web inbox's login URL (and how to reach it through an SSH tunnel)."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from agentd import daemon
from agentd.cli.root import Opt, app, config_of, paths_of
from agentd.web import auth


@app.command("web")
def web_cmd(
    ctx: typer.Context,
    token_only: Annotated[
        bool, Opt("--token", help="Print only the token (the JSON API's Bearer token).")
    ] = False,
) -> None:
    """Print the web inbox's login URL. The pages are served by `agentd serve` on 127.0.0.1
    when `[web] enabled = true` (or `[api] port` is set); the token lives in `api.token` in
    the home (0600): whoever can read it can approve actions.

    \b
    From another machine, through an SSH tunnel:
      ssh -N -L 8765:127.0.0.1:8765 you@server     then open the URL on your machine
    """
    paths = paths_of(ctx)
    cfg = config_of(ctx)
    secret = auth.token(paths.api_token)
    if token_only:
        typer.echo(secret)
        return
    port = cfg.web.port(cfg.api)
    if port is None:
        typer.echo(
            "the web inbox is off: add to config.toml\n\n  [web]\n  enabled = true\n\n"
            "and restart `agentd serve` (a reload opens no listener). Meanwhile the API "
            f"answers on the unix socket {paths.api_sock}, e.g.:\n"
            f"  curl --unix-socket {paths.api_sock} -H 'Authorization: Bearer {secret}' "
            "http://localhost/api/inbox",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(f"http://127.0.0.1:{port}/login?token={secret}")
    if daemon.daemon_pid(paths) is None:
        typer.echo("note: no daemon serves this home; start `agentd serve` first", err=True)
    host = socket.gethostname()
    typer.echo(
        f"from another machine: ssh -N -L {port}:127.0.0.1:{port} {host}  "
        "(then open the URL there)",
        err=True,
    )
