"""How agentd reaches programs outside itself: child processes (process: own sessions, fenced and
reaped), bounded HTTP (fetch) and the MCP client (mcp_client). Adapters: may import config/ and the
ground only; actions/ and sources/ build on them.
"""
