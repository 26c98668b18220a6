"""The state store, the only importer of sqlite3: schema and migrations, connections and the writer,
and every query (`queries`, and one module per table family). An adapter: may import the ground only.
"""
