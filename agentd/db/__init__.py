"""The state store: the connection protocol every query is written against (`conn`), the Writer
interface and the two stores, every query (`queries`, and one module per table family), and in
`sqlite/` all that is SQLite's own: the only importer of sqlite3, but for store.py's error catches
until the stores take a backend. An adapter: may import only the ground (agentd.models,
agentd.errors, agentd.clock).
"""
