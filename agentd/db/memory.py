"""Goal memory: what a goal knows, compact and durable — answers, outcomes of runs, check-in
verdicts, what the operator accepted or dismissed and why.

Written inside the transaction of the thing it records (a run's finish, a check-in's effect, an
answer), so memory never disagrees with the journal. Bounded: past MAX_ENTRIES the oldest entries
(operator's words last) are folded into one "earlier" entry, itself capped; `recall` returns at most
MAX_SHOWN_CHARS of text, newest first kept. Check-in prompts read this, never raw history.
"""

from __future__ import annotations

from typing import Any

from agentd.db.conn import Conn, new_id
from agentd.models import JSON

MAX_ENTRIES = 40  # entries kept per goal before the oldest are folded
FOLD_BATCH = 10  # entries folded at once (amortizes the rewrite)
MAX_TEXT = 400  # characters of one entry
MAX_EARLIER = 1200  # characters of the folded "earlier" entry (its newest part kept)
MAX_SHOWN_CHARS = 4000  # characters `recall` returns for one goal
# What the operator said or decided outlives what the agent observed when folding.
PINNED = ("answer", "known", "accepted", "dismissed")
EARLIER = "earlier"
ANSWER_MARK = " — A: "  # an answer entry reads "Q: {question}{ANSWER_MARK}{answer}"

_COLS = "entry_id, kind, text, source, at"


def _row(r: tuple[Any, ...]) -> JSON:
    return {"entry_id": r[0], "kind": r[1], "text": r[2], "source": r[3], "at": r[4]}


def remember(c: Conn, goal_id: int, kind: str, text: str, source: str, now: float) -> int:
    """Add one entry (inside the caller's transaction); fold the oldest when over the bound."""
    text = " ".join(text.split())  # one line: memory is read as a list
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    cur = c.execute(
        "INSERT INTO goal_memory (goal_id, kind, text, source, at) VALUES (?, ?, ?, ?, ?)"
        " RETURNING entry_id",
        (goal_id, kind, text, source, now),
    )
    entry_id = new_id(cur)
    count = int(
        c.execute("SELECT count(*) FROM goal_memory WHERE goal_id = ?", (goal_id,)).fetchone()[0]
    )
    if count > MAX_ENTRIES:
        _fold(c, goal_id, count - MAX_ENTRIES + FOLD_BATCH, now)
    return entry_id


def latest(c: Conn, goal_id: int) -> JSON | None:
    row = c.execute(
        f"SELECT {_COLS} FROM goal_memory WHERE goal_id = ? AND kind != ?"
        " ORDER BY entry_id DESC LIMIT 1",
        (goal_id, EARLIER),
    ).fetchone()
    return None if row is None else _row(row)


def rewrite(c: Conn, entry_id: int, text: str, now: float) -> None:
    """Replace an entry's text (a repeated "nothing to report" updates one entry, not forty)."""
    c.execute(
        "UPDATE goal_memory SET text = ?, at = ? WHERE entry_id = ?",
        (text[:MAX_TEXT], now, entry_id),
    )


def recall(c: Conn, goal_id: int) -> list[JSON]:
    """The goal's memory, oldest first ("earlier" leading), at most MAX_SHOWN_CHARS of text:
    the operator's words are kept first, then the newest of the rest."""
    rows = [
        _row(r)
        for r in c.execute(
            f"SELECT {_COLS} FROM goal_memory WHERE goal_id = ? ORDER BY entry_id DESC",
            (goal_id,),
        )
    ]
    earlier = [r for r in rows if r["kind"] == EARLIER]
    budget = MAX_SHOWN_CHARS - sum(len(r["text"]) for r in earlier)
    shown: list[JSON] = []
    for pinned in (True, False):
        for r in rows:
            if r["kind"] == EARLIER or (r["kind"] in PINNED) != pinned:
                continue
            if len(r["text"]) > budget:
                break
            budget -= len(r["text"])
            shown.append(r)
    return earlier + sorted(shown, key=lambda r: int(r["entry_id"]))


def answers(c: Conn, goal_id: int) -> int:
    """How many of the operator's answers the goal's memory holds."""
    row = c.execute(
        "SELECT count(*) FROM goal_memory WHERE goal_id = ? AND kind = 'answer'", (goal_id,)
    ).fetchone()
    return int(row[0])


def _fold(c: Conn, goal_id: int, n: int, now: float) -> None:
    """Fold the `n` oldest entries into the "earlier" entry: observations first, then (only if
    there are not enough) the operator's own words."""
    pinned = ",".join("?" * len(PINNED))
    rows = c.execute(
        f"SELECT {_COLS} FROM goal_memory WHERE goal_id = ? AND kind != ?"
        f" ORDER BY (kind IN ({pinned})), entry_id LIMIT ?",
        (goal_id, EARLIER, *PINNED, n),
    ).fetchall()
    if not rows:
        return
    folded = sorted((_row(r) for r in rows), key=lambda r: r["entry_id"])
    old = c.execute(
        "SELECT entry_id, text FROM goal_memory WHERE goal_id = ? AND kind = ?",
        (goal_id, EARLIER),
    ).fetchone()
    text = " · ".join(([old[1]] if old else []) + [f"{r['kind']}: {r['text']}" for r in folded])
    if len(text) > MAX_EARLIER:
        text = "…" + text[-(MAX_EARLIER - 1) :]
    c.executemany("DELETE FROM goal_memory WHERE entry_id = ?", [(r["entry_id"],) for r in folded])
    if old:
        c.execute("UPDATE goal_memory SET text = ?, at = ? WHERE entry_id = ?", (text, now, old[0]))
    else:
        c.execute(
            "INSERT INTO goal_memory (goal_id, kind, text, source, at) VALUES (?, ?, ?, 'fold', ?)",
            (goal_id, EARLIER, text, now),
        )
