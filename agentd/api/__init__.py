"""The local control API inside the daemon, a surface: may import the MCP server, the web inbox and
everything below them. A Starlette app on an embedded uvicorn server, on the unix socket `api.sock`
in the home (0600) and, when configured, on 127.0.0.1. It serves the JSON API (`/api/...`, Bearer
token), `POST /poke` (unix socket only: the CLI's "I wrote, look now") and the web inbox's pages
(agentd/web/).
"""
