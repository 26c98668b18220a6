"""The web inbox: server-rendered pages (no build step, a few lines of script) served by the
daemon's control API (agentd/api/). A surface: every action goes through agentd/operator/ as the CLI's;
may import views/ and everything below them, never the API or the daemon."""
