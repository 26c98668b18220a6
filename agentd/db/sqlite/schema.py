"""SQLite's schema (STRICT tables and their triggers) as ordered migrations, tracked by `PRAGMA
user_version`, each applied in one transaction.

A migration is appended, never edited once released. Each runs inside `BEGIN IMMEDIATE … COMMIT` with
its own `user_version` bump, so a failing one leaves the previous schema (and version) intact.
"""

from __future__ import annotations

import sqlite3

from agentd.db.conn import Conn
from agentd.errors import StateError

MIGRATIONS: list[str] = [
    # 1: the durable core — goals, runs, the step journal, world snapshots, events, inbox, schedules.
    """
    CREATE TABLE goals (
        goal_id     INTEGER PRIMARY KEY,
        title       TEXT NOT NULL,
        why         TEXT NOT NULL,
        agent       TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('active','paused','achieved','abandoned')),
        criteria    TEXT NOT NULL DEFAULT '[]',
        deadline    REAL,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    ) STRICT;

    CREATE TABLE runs (
        run_id            INTEGER PRIMARY KEY,
        goal_id           INTEGER NOT NULL REFERENCES goals(goal_id),
        agent             TEXT NOT NULL,
        status            TEXT NOT NULL
                          CHECK (status IN ('running','waiting','succeeded','failed','cancelled')),
        trigger           TEXT NOT NULL,
        wait              TEXT,
        wait_kind         TEXT CHECK (wait_kind IN ('inbox','event','timer')),
        wait_item_id      INTEGER,
        wait_event        TEXT,
        wait_after_event  INTEGER,
        next_wake_at      REAL,
        summary           TEXT,
        lease_owner       TEXT,
        lease_expires_at  REAL,
        lease_epoch       INTEGER NOT NULL DEFAULT 0,
        created_at        REAL NOT NULL,
        updated_at        REAL NOT NULL
    ) STRICT;
    CREATE INDEX runs_by_status ON runs(status, next_wake_at);
    CREATE INDEX runs_by_goal ON runs(goal_id, status);
    CREATE INDEX runs_by_item ON runs(wait_item_id) WHERE status = 'waiting';
    CREATE INDEX runs_by_event ON runs(wait_event) WHERE status = 'waiting';
    CREATE INDEX runs_waiting ON runs(wait_kind) WHERE status = 'waiting';

    CREATE TABLE steps (
        run_id        INTEGER NOT NULL REFERENCES runs(run_id),
        seq           INTEGER NOT NULL,
        kind          TEXT NOT NULL,
        status        TEXT NOT NULL CHECK (status IN ('started','done','error')),
        action        TEXT,
        args          TEXT,
        digest        TEXT,
        verdict       TEXT CHECK (verdict IN ('allow','approve','deny')),
        result        TEXT,
        data          TEXT NOT NULL DEFAULT '{}',
        tokens_in     INTEGER NOT NULL DEFAULT 0,
        tokens_out    INTEGER NOT NULL DEFAULT 0,
        created_at    REAL NOT NULL,
        completed_at  REAL,
        PRIMARY KEY (run_id, seq)
    ) STRICT;  -- a rowid table: concurrent runs' steps append to the same few pages per commit

    -- Rate limits: executions are logged only for the (agent, action) pairs that have one (the
    -- daemon writes the pairs from config at start), so unlimited actions pay no extra page.
    CREATE TABLE rate_limited (
        agent   TEXT NOT NULL,
        action  TEXT NOT NULL,
        PRIMARY KEY (agent, action)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE rate_log (
        agent   TEXT NOT NULL,
        action  TEXT NOT NULL,
        at      REAL NOT NULL
    ) STRICT;
    CREATE INDEX rate_log_by_action ON rate_log(agent, action, at);
    CREATE TRIGGER steps_rate_log AFTER INSERT ON steps WHEN NEW.kind = 'act' BEGIN
        INSERT INTO rate_log (agent, action, at)
        SELECT r.agent, NEW.action, NEW.created_at FROM runs r
        JOIN rate_limited l ON l.agent = r.agent AND l.action = NEW.action
        WHERE r.run_id = NEW.run_id;
    END;

    CREATE TABLE world (
        snapshot_id  INTEGER PRIMARY KEY,
        agent        TEXT NOT NULL,
        run_id       INTEGER REFERENCES runs(run_id),
        taken_at     REAL NOT NULL,
        data         TEXT NOT NULL,
        changes      TEXT NOT NULL
    ) STRICT;
    CREATE INDEX world_by_agent ON world(agent, snapshot_id);
    CREATE INDEX world_by_time ON world(taken_at);

    CREATE TABLE events (
        event_id    INTEGER PRIMARY KEY,
        name        TEXT NOT NULL,
        data        TEXT NOT NULL DEFAULT '{}',
        dedupe_key  TEXT UNIQUE,
        source      TEXT NOT NULL DEFAULT 'cli',
        created_at  REAL NOT NULL
    ) STRICT;
    CREATE INDEX events_by_name ON events(name, event_id);

    CREATE TABLE inbox (
        item_id      INTEGER PRIMARY KEY,
        kind         TEXT NOT NULL CHECK (kind IN ('question','approval','notice')),
        status       TEXT NOT NULL CHECK (status IN
                     ('open','answered','approved','consumed','denied','expired','dismissed')),
        goal_id      INTEGER REFERENCES goals(goal_id),
        run_id       INTEGER REFERENCES runs(run_id),
        seq          INTEGER,
        title        TEXT NOT NULL,
        body         TEXT NOT NULL DEFAULT '',
        action       TEXT,
        args         TEXT,
        digest       TEXT,
        rule         TEXT,
        answer       TEXT,
        edited       INTEGER NOT NULL DEFAULT 0,
        data         TEXT NOT NULL DEFAULT '{}',
        created_at   REAL NOT NULL,
        expires_at   REAL,
        resolved_at  REAL,
        consumed_by  TEXT
    ) STRICT;
    CREATE INDEX inbox_by_status ON inbox(status, expires_at);
    CREATE INDEX inbox_by_run ON inbox(run_id);
    CREATE INDEX inbox_by_resolved ON inbox(resolved_at);

    CREATE TABLE schedules (
        schedule_id    INTEGER PRIMARY KEY,
        goal_id        INTEGER REFERENCES goals(goal_id),
        kind           TEXT NOT NULL,
        spec           TEXT NOT NULL,
        last_fired_at  REAL,
        next_fire_at   REAL,
        enabled        INTEGER NOT NULL DEFAULT 1
    ) STRICT;

    CREATE TABLE meta (
        key    TEXT PRIMARY KEY,
        value  TEXT NOT NULL
    ) STRICT;
    """,
    # 2: the outer loop — schedules with time zone and misfire policy, per-goal cadence, the
    # check-in journal (one row per fire, resumable), and goal memory.
    """
    ALTER TABLE schedules ADD COLUMN tz TEXT NOT NULL DEFAULT 'UTC';
    ALTER TABLE schedules ADD COLUMN misfire TEXT NOT NULL DEFAULT 'once'
        CHECK (misfire IN ('skip', 'once', 'all'));
    ALTER TABLE schedules ADD COLUMN misfire_cap INTEGER NOT NULL DEFAULT 3;
    ALTER TABLE schedules ADD COLUMN max_lateness_s REAL NOT NULL DEFAULT 86400;
    ALTER TABLE schedules ADD COLUMN jitter_s REAL NOT NULL DEFAULT 0;
    ALTER TABLE schedules ADD COLUMN created_at REAL NOT NULL DEFAULT 0;
    CREATE INDEX schedules_by_goal ON schedules(goal_id, enabled);

    CREATE TABLE cadences (
        goal_id        INTEGER PRIMARY KEY REFERENCES goals(goal_id),
        every_s        REAL,
        min_s          REAL,
        max_s          REAL,
        quiet          TEXT,
        tz             TEXT,
        snoozed_until  REAL,
        backoff        INTEGER NOT NULL DEFAULT 0,
        next_at        REAL,
        next_why       TEXT,
        updated_at     REAL NOT NULL
    ) STRICT;
    CREATE INDEX cadences_due ON cadences(next_at);

    CREATE TABLE checkins (
        checkin_id    INTEGER PRIMARY KEY,
        goal_id       INTEGER NOT NULL REFERENCES goals(goal_id),
        schedule_id   INTEGER,
        due_at        REAL NOT NULL,
        fired_at      REAL NOT NULL,
        status        TEXT NOT NULL CHECK (status IN
                      ('due', 'skipped', 'missed', 'deciding', 'decided', 'done', 'failed')),
        precheck      TEXT NOT NULL DEFAULT '{}',
        raw           TEXT,
        decision      TEXT,
        model         TEXT,
        tokens_in     INTEGER NOT NULL DEFAULT 0,
        tokens_out    INTEGER NOT NULL DEFAULT 0,
        cost_usd      REAL,
        effect        TEXT,
        next_at       REAL,
        reason        TEXT,
        completed_at  REAL
    ) STRICT;
    CREATE UNIQUE INDEX checkins_once ON checkins(goal_id, coalesce(schedule_id, 0), due_at);
    CREATE INDEX checkins_open ON checkins(status) WHERE status IN ('due', 'deciding', 'decided');
    CREATE INDEX checkins_by_goal ON checkins(goal_id, checkin_id);

    CREATE TABLE goal_memory (
        entry_id  INTEGER PRIMARY KEY,
        goal_id   INTEGER NOT NULL REFERENCES goals(goal_id),
        kind      TEXT NOT NULL,
        text      TEXT NOT NULL,
        source    TEXT NOT NULL DEFAULT '',
        at        REAL NOT NULL
    ) STRICT;
    CREATE INDEX goal_memory_by_goal ON goal_memory(goal_id, entry_id);

    -- Every execution is logged for rate limits (not only those limited when it ran): a limit
    -- added to the config counts the hour before it, too.
    DROP TRIGGER steps_rate_log;
    CREATE TRIGGER steps_rate_log AFTER INSERT ON steps WHEN NEW.kind = 'act' BEGIN
        INSERT INTO rate_log (agent, action, at)
        SELECT r.agent, NEW.action, NEW.created_at FROM runs r WHERE r.run_id = NEW.run_id;
    END;
    """,
    # 3: the inner loop — every version of a build run's artifact, with the judge's verdict.
    """
    CREATE TABLE artifacts (
        run_id      INTEGER NOT NULL REFERENCES runs(run_id),
        version     INTEGER NOT NULL,
        goal_id     INTEGER NOT NULL REFERENCES goals(goal_id),
        seq         INTEGER NOT NULL,  -- the GENERATE step that made it
        request     TEXT NOT NULL,     -- what was asked (kept when the build's journal ages out)
        text        TEXT NOT NULL,
        chars       INTEGER NOT NULL,  -- the length the model wrote (text is cut to the bound)
        status      TEXT NOT NULL CHECK (status IN ('draft','passed','failed')),
        verdict     TEXT,  -- JSON, once judged
        model       TEXT,
        created_at  REAL NOT NULL,
        judged_at   REAL,
        PRIMARY KEY (run_id, version)
    ) STRICT;
    CREATE INDEX artifacts_by_goal ON artifacts(goal_id, run_id);
    """,
    # 4: notifications — every new inbox item is queued by a trigger in the transaction that posts
    # it (whoever writes it: daemon, CLI, MCP), so none is missed; the daemon expands the queue into
    # the outbox: one row per (item, channel, reminder stage), retried with backoff across restarts.
    """
    CREATE TABLE notify_queue (
        item_id  INTEGER PRIMARY KEY
    ) STRICT;
    CREATE TRIGGER inbox_notify_queue AFTER INSERT ON inbox BEGIN
        INSERT OR IGNORE INTO notify_queue (item_id) VALUES (NEW.item_id);
    END;

    CREATE TABLE outbox (
        outbox_id        INTEGER PRIMARY KEY,
        dedupe_key       TEXT NOT NULL UNIQUE,  -- item, its posting time, channel, stage
        channel          TEXT NOT NULL,
        item_id          INTEGER,
        goal_id          INTEGER,
        stage            INTEGER NOT NULL DEFAULT 0,  -- 0 first message, then reminders
        message          TEXT NOT NULL,  -- JSON, rendered by the channel at each attempt
        status           TEXT NOT NULL CHECK (status IN ('pending','sent','failed','cancelled')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_attempt_at  REAL NOT NULL,
        last_attempt_at  REAL,
        last_error       TEXT,
        created_at       REAL NOT NULL,
        sent_at          REAL
    ) STRICT;
    CREATE INDEX outbox_due ON outbox(next_attempt_at) WHERE status = 'pending';
    CREATE INDEX outbox_by_item ON outbox(item_id);
    CREATE INDEX outbox_by_channel ON outbox(channel, last_attempt_at);
    """,
    # 5: web inbox sessions — one row per login, found by the SHA-256 of its random key (the key
    # itself lives only in the browser); ended by logout, expiry, a new token or the operator.
    """
    CREATE TABLE web_sessions (
        session_id  INTEGER PRIMARY KEY,
        key_hash    TEXT NOT NULL UNIQUE,
        token_mark  TEXT NOT NULL,  -- a digest of the token it was opened with: a new one ends it
        client      TEXT NOT NULL DEFAULT '',  -- the browser's User-Agent, cut short
        created_at  REAL NOT NULL,
        seen_at     REAL NOT NULL,
        expires_at  REAL NOT NULL,
        ended_at    REAL,
        ended_why   TEXT CHECK (ended_why IN ('logout', 'revoked', 'rotated'))
    ) STRICT;
    CREATE INDEX web_sessions_live ON web_sessions(expires_at) WHERE ended_at IS NULL;
    """,
    # 6: a message held by quiet hours says so — until when and in which zone — so `status` can
    # name it and a changed setting (the goal's quiet hours, the channel's) can release it.
    """
    ALTER TABLE outbox ADD COLUMN held_until REAL;  -- NULL: not held; else its next_attempt_at
    ALTER TABLE outbox ADD COLUMN held_tz TEXT;  -- the IANA zone of the quiet hours that hold it
    """,
    # 7: the daemons serving this database, each start a new owner (host:pid:random), renewing
    # its row with its runs' leases (db/leases.py): `agentd status` lists them; a daemon that
    # stopped cleanly says so. Times are on the database's clock, as the leases are.
    """
    CREATE TABLE daemons (
        owner       TEXT PRIMARY KEY,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        version     TEXT NOT NULL,
        lease_s     REAL NOT NULL,
        started_at  REAL NOT NULL,
        renewed_at  REAL NOT NULL,
        stopped_at  REAL
    ) STRICT;
    CREATE INDEX runs_by_owner ON runs(lease_owner) WHERE status = 'running';
    """,
    # 8: check-ins and outbox messages are claimed like runs, so two daemons sharing a database
    # never run one check-in or send one message at the same time: the owner that took the row
    # and until when (the database's clock; NULL: nobody). Older daemons ignore both columns.
    """
    ALTER TABLE checkins ADD COLUMN claimed_by TEXT;
    ALTER TABLE checkins ADD COLUMN claim_expires_at REAL;
    ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
    ALTER TABLE outbox ADD COLUMN claim_expires_at REAL;
    """,
    # 9: each daemon records the config it runs (the sha256 of the file's bytes, at its start
    # and each reload, and when): `status` shows them side by side, `doctor` compares this
    # host's daemon's with the file. Older daemons leave both NULL.
    """
    ALTER TABLE daemons ADD COLUMN config_sha256 TEXT;
    ALTER TABLE daemons ADD COLUMN config_loaded_at REAL;
    """,
    # 10: costs that grow with what is due, not with what exists (issue 35): the daemon's tick
    # reads due schedules and unplanned looks through indexes, lists page by status, and
    # `status` finds goals whose check-ins fail without reading every goal; goals not yet planned
    # are found whatever their id, and a paused or closed goal's look leaves the due-look index.
    """
    CREATE INDEX schedules_due ON schedules(next_fire_at) WHERE enabled = 1;
    CREATE INDEX goals_by_status ON goals(status, goal_id);
    CREATE INDEX goals_by_agent ON goals(agent, status, goal_id);
    CREATE INDEX checkins_failed ON checkins(goal_id) WHERE status = 'failed';
    CREATE INDEX cadences_unplanned ON cadences(goal_id) WHERE next_at IS NULL AND next_why IS NULL;
    UPDATE cadences SET next_at = NULL,
        next_why = 'goal ' || (SELECT g.status FROM goals g WHERE g.goal_id = cadences.goal_id)
        WHERE goal_id IN (SELECT goal_id FROM goals WHERE status <> 'active');
    """,
    # 11: nudge quality (`agentd checkins report`, `status`, /metrics) reads a home's nudges by
    # goal: only those rows, not the whole inbox.
    """
    CREATE INDEX inbox_nudges ON inbox(goal_id, item_id) WHERE rule = 'nudge';
    """,
    # 12: a status's inbox items page in id order through an index (the web inbox, `inbox list
    # --after`, /api/inbox), and the web inbox counts the open approvals and questions of other
    # pages from an index of only those; a paused or closed goal's schedules are parked (`next_fire_at` NULL:
    # out of the due search's range; resuming makes them due at once, the misfire policy then
    # deciding), and a schedule whose next fire was never computed is due at once; `status`
    # reads the quiet hours goals set for themselves from an index of only those.
    """
    CREATE INDEX inbox_by_status_id ON inbox(status, item_id);
    CREATE INDEX inbox_waiting ON inbox(kind) WHERE status = 'open' AND kind IN ('approval', 'question');
    CREATE INDEX cadences_quiet ON cadences(quiet, tz) WHERE quiet IS NOT NULL OR tz IS NOT NULL;
    UPDATE schedules SET next_fire_at = coalesce(last_fired_at, created_at)
        WHERE enabled = 1 AND next_fire_at IS NULL
        AND goal_id IN (SELECT goal_id FROM goals WHERE status = 'active');
    UPDATE schedules SET next_fire_at = NULL
        WHERE enabled = 1 AND goal_id IN (SELECT goal_id FROM goals WHERE status <> 'active');
    """,
]


def version(conn: Conn | sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, migrations: list[str] | None = None) -> int:
    """Apply pending migrations in order; returns the schema version reached.

    The connection must be in autocommit mode (isolation_level=None). Each migration runs in its own
    `BEGIN IMMEDIATE` transaction with its `user_version` bump, and the version is read again once
    the write lock is held: another process may have migrated while this one waited for the lock.
    """
    steps = MIGRATIONS if migrations is None else migrations
    while (current := _check(version(conn), len(steps))) < len(steps):
        number = current + 1
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _check(version(conn), len(steps)) != current:
                conn.execute("ROLLBACK")  # someone else applied it; look again
                continue
            for statement in _statements(steps[current]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StateError(f"migration {number} failed and was rolled back: {e}") from e
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return len(steps)


def _check(current: int, known: int) -> int:
    if current > known:
        raise StateError(
            f"database schema is version {current}, newer than this agentd knows ({known}); "
            "upgrade agentd"
        )
    return current


def _statements(script: str) -> list[str]:
    """A script's statements, one by one (`executescript` would COMMIT the open transaction).

    Cut at each `;` that SQLite itself sees as the end of a statement, so a `;` inside a trigger
    body, a string or a comment does not cut.
    """
    out: list[str] = []
    pending = ""
    *pieces, tail = script.split(";")
    for piece in pieces:
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    # After the last `;`: whitespace or comments (executing them does nothing), or a statement
    # left unfinished, which fails when executed and so rolls the migration back.
    if (pending + tail).strip():
        out.append((pending + tail).strip())
    return out
