"""agentd as an MCP server — `agentd mcp` (stdio) and /mcp on the daemon's API: a goal's context as
resources (context), the operator's everyday operations as tools (tools), elicitation for approvals.
A surface: reaches state through the operator layer; may import views/ and everything below them.
The MCP *client* (an app's resources and tools) is an adapter: agentd/outside/mcp_client.py."""
