"""The state store: the connection protocol every query is written against (`conn`) and its SQL
hooks (`dialect`), the Writer interface, the Backend seam (`backend`) and the two stores over it,
every query (`queries`, and one module per table family), and in `sqlite/` all that is SQLite's
own: the only importer of sqlite3. An adapter: may import only the ground (agentd.models,
agentd.errors, agentd.clock).
"""
