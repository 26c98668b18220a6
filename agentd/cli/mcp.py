"""`agentd mcp`: serve the home's goals, inbox and runs to an MCP client over stdio."""

from __future__ import annotations

import asyncio

import typer

from agentd.cli.root import app, config_of, console_logging, open_store, paths_of


@app.command("mcp")
def mcp_cmd(ctx: typer.Context) -> None:
    """Serve this home to an MCP client over stdio (started by the client, e.g. Claude Desktop):
    goal-context documents as resources, the everyday operations as tools. Only protocol is
    written to stdout; warnings go to stderr. Approving stays with a person: see [mcp] in
    config.toml.

    \b
    In the client's config:
      {"mcpServers": {"agentd": {"command": "agentd", "args": ["mcp", "--home", "/path/to/home"]}}}
    """
    from agentd.mcp import server  # the MCP SDK: only this command needs it

    console_logging(ctx)  # its warnings (mcp.config_invalid) go to stderr: stdout is the protocol's
    cfg = config_of(ctx)
    with open_store(ctx):  # a missing or lost database is said now, not at the first request
        pass
    try:
        asyncio.run(server.run_stdio(server.build(paths_of(ctx), cfg)))
    except KeyboardInterrupt:  # Ctrl-C in a terminal: the client is the person; no traceback
        raise typer.Exit(130) from None
