"""SQLite, the embedded store: the one place for what only SQLite has (its PRAGMAs, `BEGIN IMMEDIATE`,
`PRAGMA data_version`, the STRICT schema and its triggers) and the writer thread that commits to it.
Part of db/: may import db/'s protocols and the ground (agentd.models, agentd.errors, agentd.clock).
"""
