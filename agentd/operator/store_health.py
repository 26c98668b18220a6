"""What `agentd doctor` checks of a home's store when it is a PostgreSQL database (the SQLite file
doctor inspects itself): the connection, the server's version, the session settings a new
connection carries, and the schema against this agentd (agentd/db/postgres/checks.py, the only
code here that talks to the server). None for a SQLite home."""

from __future__ import annotations

from agentd.config import Paths
from agentd.config.where import home_store
from agentd.views.records import Check


def postgres_checks(paths: Paths) -> list[Check] | None:
    """The checks of the PostgreSQL database the home at `paths` names in [store], or None when
    its state is the SQLite file. Raises ConfigError for a [store] that names no usable URL."""
    found = home_store(paths.home)
    if found is None:
        return None
    url, store = found
    from agentd.db.postgres import checks  # psycopg: only a PostgreSQL home pays for it

    return [
        Check(f.name, f.ok, f.message, f.required, f.warning)
        for f in checks.examine(url, store.lease_s, store.listen)
    ]


def served(checks: list[Check]) -> bool:
    """Whether the database answered and holds a schema this agentd reads: what the checks of
    its contents (daemons, goals, channels) need."""
    names = {c.name: c for c in checks}
    schema = names.get("schema")
    return names["database"].ok and schema is not None and (schema.ok or schema.warning)
