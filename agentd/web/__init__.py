"""The web inbox: server-rendered pages (no build step, a few lines of script) served by the
daemon's control API (agentd/api/). Every action goes through agentd/inbox.py, as the CLI's."""
