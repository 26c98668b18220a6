"""Wake-ups between processes sharing a database: a commit another daemon may act on (an answer,
an event, a run started by the CLI) tells them to look now.

On PostgreSQL that is one `pg_notify` on the channel `agentd_wake`, delivered when the transaction
commits; its payload is empty, so however many writes of a transaction notify, the server sends
one (it folds identical notifications of a transaction). Daemons listen on a thread of their own
(db/postgres/listener.py) and never depend on it: the timer and the safety scan stay. On SQLite
there is one daemon per file and the CLI pokes it over the home's socket (db/poke.py): nothing here.
"""

from __future__ import annotations

from agentd.db.conn import Conn

CHANNEL = "agentd_wake"


def notify_peers(c: Conn) -> None:
    """Inside a write transaction: wake the daemons listening when it commits (PostgreSQL)."""
    if c.dialect.sqlite:
        return
    c.execute(f"SELECT pg_notify('{CHANNEL}', '')")
