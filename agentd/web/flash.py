"""The flash box, keyed to the action that just happened. After a form, the browser is sent to a
page whose query string holds only a random key (`?note=K`); the daemon keeps, under that key and
for that page only, the fixed wording of what was done ("Approved item 5 as proposed.") or of what
failed, with the inbox's own message. Nothing from a query string is ever shown, and a link cannot
claim an action nobody took: a key the daemon did not hand out shows nothing."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from agentd.errors import AgentdError, Refused, Unchanged, UsageError

DONE = {
    "approved": "Approved item {item} as proposed.",
    "approved-edited": "Approved item {item} with your edits (bound by a new digest).",
    "denied": "Denied item {item}; the run is told.",
    "answered": "Answered item {item}.",
    "dismissed": "Dismissed item {item}.",
    "accepted": "Accepted the nudge of item {item}.",
    "accepted-run": "Accepted the nudge of item {item}: run {run} starts.",
    "dismissed-many": "Dismissed {count} notice(s).",
    "dismissed-some": "Dismissed {count} notice(s); {skipped} no longer open, left as they were.",
    "paused": "Paused goal {goal}: no new runs start until it is resumed.",
    "resumed": "Resumed goal {goal}.",
    "checkin": "Goal {goal} checks in now.",
    "snoozed": "Snoozed goal {goal}'s check-ins.",
    "unsnoozed": "Goal {goal}'s snooze is over.",
    "scheduled": "Added schedule {schedule} to goal {goal}.",
    "unscheduled": "Removed schedule {schedule} of goal {goal}.",
    "logged-out": "Logged out.",
}
ERRORS = {
    "unchanged": "Nothing changed: that was already done.",
    "refused": "Not done: the item's state does not allow it.",
    "invalid": "Not done: what was entered is not valid.",
    "failed": "Not done.",
}
KEEP = 256  # notes kept for the pages the browser is sent back to


def error_code(e: AgentdError) -> str:
    if isinstance(e, Unchanged):
        return "unchanged"
    if isinstance(e, Refused):
        return "refused"
    return "invalid" if isinstance(e, UsageError) else "failed"


def done_text(done: Mapping[str, str]) -> str:
    """The wording of what was just done, from the codes the action returned (web/data.py)."""
    ids = {k: done.get(k, "") for k in ("item", "run", "goal", "schedule", "count", "skipped")}
    return DONE[done["done"]].format(**ids)


def error_text(e: AgentdError) -> str:
    """The wording of a failure, followed by the inbox's own message ("inbox item 5 is …")."""
    return f"{ERRORS[error_code(e)]} {e}"


@dataclass(frozen=True)
class Note:
    path: str  # the page it is shown on
    text: str
    failed: bool


class Notes:
    """What the last actions did or why they failed, by a random key, each for one page."""

    def __init__(self) -> None:
        self._notes: OrderedDict[str, Note] = OrderedDict()

    def add(self, path: str, text: str, *, failed: bool = False) -> str:
        key = secrets.token_urlsafe(12)
        self._notes[key] = Note(path, text, failed)
        while len(self._notes) > KEEP:
            self._notes.popitem(last=False)
        return key

    def shown(self, query: Mapping[str, str], path: str) -> tuple[str, str]:
        """(flash, error) for the page at `path` asked for with `query`: ("", "") unless its
        `note` is a key handed out for this page."""
        note = self._notes.get(query.get("note", ""))
        if note is None or note.path != path:
            return "", ""
        return ("", note.text) if note.failed else (note.text, "")
