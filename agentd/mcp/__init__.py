"""Goal context over MCP: `server` (agentd as an MCP server: resources, tools, elicitation for
approvals) and `client` (reading resources and calling tools of an app that owns a goal's context)."""
