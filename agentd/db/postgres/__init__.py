"""PostgreSQL, the shared store (issue 21): its connections and session settings, its schema and
migrations ledger; the only importer of psycopg. Part of db/: may import db/'s protocols and the
ground (agentd.models, agentd.errors, agentd.clock).
"""
