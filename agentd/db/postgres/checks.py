"""What `agentd doctor` checks of a PostgreSQL store (through agentd/operator/store_health.py): can
this host connect, is the server new enough, does a new connection carry the session settings
agentd relies on (a pooler in transaction mode drops them), may every role connect (PUBLIC), and
is the schema one this agentd can serve. Each finding says what to do; the URL is named by
`connection.label`, never with its password. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from agentd.db.postgres import connection, schema
from agentd.errors import StateError

MIN_SERVER = 130000  # PostgreSQL 13: jsonb, identity columns, pg_snapshot_xmax, FORCE drops
CONNECT_TIMEOUT_S = (
    10  # doctor's own first connection: an unreachable host is an answer, not a hang
)
SETTINGS = ("idle_in_transaction_session_timeout", "lock_timeout", "TimeZone")
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Zulu", "Etc/Zulu"})


@dataclass(frozen=True)
class Finding:
    """One check, in the fields of doctor's Check (name, ok, message, required, warning)."""

    name: str
    ok: bool
    message: str
    required: bool = True
    warning: bool = False


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    for prefix in ("connection is bad: ", "connection failed: "):
        first = first.removeprefix(prefix)
    return first


def reach(url: str) -> tuple[psycopg.Connection[Any] | None, Finding]:
    """A plain connection (bounded by CONNECT_TIMEOUT_S unless the URL sets connect_timeout) and
    the finding that says whether it connected, or why not and what to do."""
    where = connection.label(url)
    bound: dict[str, Any] = (
        {} if "connect_timeout" in url else {"connect_timeout": CONNECT_TIMEOUT_S}
    )
    try:
        raw = psycopg.connect(url, autocommit=True, application_name="agentd doctor", **bound)
    except psycopg.Error as e:
        why = connection.redact(_first_line(e), url)
        return None, Finding(
            "database",
            False,
            f"{where}: cannot connect: {why}\nIs the server running and reachable from this "
            "host, and are the user, database and password right (a password belongs in "
            "url_env or ~/.pgpass)? Check [store] in config.toml; nothing runs until it connects",
        )
    user = raw.info.user
    return raw, Finding("database", True, f"{where}: connected as {user}")


def server(raw: psycopg.Connection[Any]) -> Finding:
    number = raw.info.server_version  # 150018 for 15.18
    shown = raw.execute("SHOW server_version").fetchone()
    name = str(shown[0]).split(" ")[0] if shown else str(number)
    if number < MIN_SERVER:
        return Finding(
            "server", False, f"PostgreSQL {name}: too old; agentd needs PostgreSQL 13 or newer"
        )
    return Finding("server", True, f"PostgreSQL {name}")


def _ms(setting: str, unit: str | None) -> float:
    """A time setting of pg_settings in milliseconds (its unit: ms, s or min)."""
    scale = {"ms": 1.0, "s": 1000.0, "min": 60000.0, None: 1.0}.get(unit, 1.0)
    return float(setting) * scale


def session(url: str, lease_s: float) -> Finding:
    """The settings agentd's connections rely on, read back by a later statement of a new
    connection made as agentd makes them: a pooler that lends another server session per
    statement or transaction drops what the connection SET."""
    conn = connection.connect(url, application_name="agentd doctor", lease_s=lease_s)
    try:
        rows = conn.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name IN (?, ?, ?)", SETTINGS
        ).fetchall()
    finally:
        conn.close()
    got = {str(r[0]): (str(r[1]), None if r[2] is None else str(r[2])) for r in rows}
    wrong: list[str] = []
    said: list[str] = []
    idle = _ms(*got.get("idle_in_transaction_session_timeout", ("0", "ms")))
    lease_ms = lease_s * 1000
    if idle <= 0 or idle >= lease_ms:
        wrong.append(
            f"idle_in_transaction_session_timeout is {_shown(idle)}, not below the lease "
            f"([store] lease_s = {lease_s:g}): a frozen daemon's row locks would outlive it"
        )
    else:
        said.append(f"idle_in_transaction_session_timeout {_shown(idle)} (lease {lease_s:g}s)")
    lock = _ms(*got.get("lock_timeout", ("0", "ms")))
    if lock <= 0:
        wrong.append("lock_timeout is not set: a lock wait would hang instead of failing")
    else:
        said.append(f"lock_timeout {_shown(lock)}")
    zone = got.get("TimeZone", ("?", None))[0]
    if zone not in UTC_NAMES:
        wrong.append(f"TimeZone is {zone}, not UTC")
    else:
        said.append(f"TimeZone {zone}")
    if wrong:
        return Finding(
            "session",
            False,
            "; ".join(wrong) + "\na new connection lost what agentd SET on it: a pooler in "
            "transaction or statement mode does that; point [store] url at the server or at a "
            "pool in session mode",
        )
    return Finding("session", True, "; ".join(said))


def _shown(ms: float) -> str:
    if ms <= 0:
        return "0 (off)"
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms:g}ms"


def schema_state(url: str) -> Finding:
    """The schema's version against this agentd's: older is upgraded by the next daemon or
    command that writes; newer breaking is refused; newer compatible is served."""
    conn = connection.connect(url, application_name="agentd doctor")
    try:
        have = schema.version(conn)
        known = len(schema.MIGRATIONS)
        empty = (
            have == 0
            and conn.execute(
                "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema()"
            ).fetchone()[0]
            == 0
        )
        breaking = schema.newer_breaking(conn, known) if have > known else []
    finally:
        conn.close()
    if empty:
        return Finding(
            "schema", False, "the database is empty: `agentd serve` (or `agentd init`) creates "
            "agentd's schema in it"
        )  # fmt: skip
    if have == known:
        return Finding("schema", True, f"version {have} of {known} (current)")
    if have < known:
        return Finding(
            "schema", False, f"version {have} of {known}: `agentd serve`, or any command that "
            "writes, upgrades it (daemons of an older agentd keep serving a compatible one)"
        )  # fmt: skip
    if breaking:
        names = "; ".join(f"{v}: {n}" for v, n in breaking)
        return Finding(
            "schema", False, f"version {have}, newer than this agentd knows ({known}), with "
            f"breaking migrations ({names}): this agentd refuses to serve it; upgrade agentd"
        )  # fmt: skip
    return Finding(
        "schema", False, f"version {have}, newer than this agentd knows ({known}) but "
        "compatible: this agentd serves it; upgrade agentd to use what is new", required=False,
        warning=True,
    )  # fmt: skip


def listening(raw: psycopg.Connection[Any], listen: bool) -> Finding:
    """Whether every live daemon's LISTEN connection is up (their listeners name themselves
    `agentd-listener`); advice only: nothing depends on LISTEN."""
    if not listen:
        return Finding("listener", True, "LISTEN off ([store] listen = false): daemons notice "
                       "other processes' commits at their safety scan", required=False)  # fmt: skip
    if raw.execute("SELECT to_regclass('daemons')").fetchone()[0] is None:  # type: ignore[index]
        return Finding("listener", True, "no daemon has served this database yet", required=False)
    live = raw.execute(
        "SELECT count(*) FROM daemons WHERE stopped_at IS NULL"
        " AND renewed_at + lease_s >= extract(epoch from clock_timestamp())"
    ).fetchone()[0]  # type: ignore[index]
    heard = raw.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'agentd-listener'"
    ).fetchone()[0]  # type: ignore[index]
    said = f"{heard} listening for {live} live daemon{'' if live == 1 else 's'}"
    if heard >= live:
        return Finding("listener", True, said, required=False)
    return Finding(
        "listener", False, f"{said}: a listener is down (it reconnects by itself; meanwhile "
        "commits reach its daemon at the safety scan). Behind a pooler in transaction mode, "
        "set [store] listen_url to a direct connection", required=False, warning=True,
    )  # fmt: skip


def access(raw: psycopg.Connection[Any]) -> Finding:
    """Whether every role of the server may connect to the database (PostgreSQL's default for
    PUBLIC), or create objects in the schema agentd's tables are in (the default before
    PostgreSQL 15): advice, since agentd locks only rows of its own tables, but such a role can
    still flood NOTIFY, fill connection slots, read whatever was granted to PUBLIC — and, with
    CREATE, take a table's name before a migration makes it (that migration then fails)."""
    name, user, schema, public, create = raw.execute(
        "SELECT current_database(), current_user, current_schema(),"
        " has_database_privilege('public', current_database(), 'CONNECT'),"
        " coalesce(has_schema_privilege('public', current_schema(), 'CREATE'), false)"
    ).fetchone()  # type: ignore[misc]
    if not public and not create:
        return Finding("access", True, "only the roles granted CONNECT may connect", required=False)
    db, role, where = _ident(str(name)), _ident(str(user)), _ident(str(schema))
    fixes, what = [], []
    if public:
        what.append(f"every role of the server may connect to {db} (PUBLIC has CONNECT)")
        fixes.append(
            f"REVOKE CONNECT ON DATABASE {db} FROM PUBLIC; GRANT CONNECT ON DATABASE {db} TO {role};"
        )
    if create:
        what.append(f"every role may create tables in schema {where} (PUBLIC has CREATE)")
        fixes.append(f"REVOKE CREATE ON SCHEMA {where} FROM PUBLIC;")
    return Finding(
        "access", False, f"{' and '.join(what)}: run `{' '.join(fixes)}` as its owner"
        " (docs/scale-out.md)", required=False, warning=True,
    )  # fmt: skip


def _ident(name: str) -> str:
    """`name` as SQL writes it: bare when it is a plain lower-case word, else double-quoted."""
    plain = name.replace("_", "a").isalnum() and name.islower() and not name[:1].isdigit()
    return name if plain and name.isascii() else '"' + name.replace('"', '""') + '"'


def examine(url: str, lease_s: float, listen: bool = True) -> list[Finding]:
    """The connection first; when it fails, nothing more can be told."""
    raw, reached = reach(url)
    if raw is None:
        return [reached]
    try:
        found = [reached, server(raw), access(raw), listening(raw, listen)]
    finally:
        raw.close()
    checks: dict[str, Callable[[], Finding]] = {
        "session": lambda: session(url, lease_s),
        "schema": lambda: schema_state(url),
    }
    for name, check in checks.items():
        try:
            found.append(check())
        except StateError as e:  # connection.connect's: the URL named without its password
            found.append(Finding(name, False, str(e)))
        except psycopg.Error as e:  # a connection lost half-way, a permission refused
            found.append(Finding(name, False, str(connection.translate(e, url))))
    return found
