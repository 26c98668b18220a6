"""The SQLite state: schema and migrations, connections, and every query (`agentd.db.queries`)."""
