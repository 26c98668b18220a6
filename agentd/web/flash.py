"""The flash box's wording. After a form, the browser is sent to a page whose query string holds
only fixed codes (`?done=approved&item=5`, `?error=refused&note=K`), mapped here to text: nothing
from a query string is ever shown, so a link cannot put its own words on a trusted page. An
error's detail (the inbox's own message) stays in the daemon under a random key (`note`)."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Mapping

from agentd.errors import AgentdError, Refused, Unchanged, UsageError

DONE = {
    "approved": "Approved item {item} as proposed.",
    "approved-edited": "Approved item {item} with your edits (bound by a new digest).",
    "denied": "Denied item {item}; the run is told.",
    "answered": "Answered item {item}.",
    "dismissed": "Dismissed item {item}.",
    "accepted": "Accepted the nudge of item {item}.",
    "accepted-run": "Accepted the nudge of item {item}: run {run} starts.",
    "logged-out": "Logged out.",
}
ERRORS = {
    "unchanged": "Nothing changed: that was already done.",
    "refused": "Not done: the item's state does not allow it.",
    "invalid": "Not done: what was entered is not valid.",
    "failed": "Not done.",
}
KEEP = 64  # error details kept for the page the browser is sent back to


def error_code(e: AgentdError) -> str:
    if isinstance(e, Unchanged):
        return "unchanged"
    if isinstance(e, Refused):
        return "refused"
    return "invalid" if isinstance(e, UsageError) else "failed"


def _numbers(query: Mapping[str, str]) -> dict[str, str] | None:
    """The ids a wording names, when each is a plain number."""
    ids = {k: query.get(k, "") for k in ("item", "run")}
    return ids if all(v.isdigit() and len(v) < 20 for v in ids.values() if v) else None


def done_text(query: Mapping[str, str]) -> str:
    """The wording of `?done=CODE`, or "" for an unknown code or an id that is not a number."""
    wording = DONE.get(query.get("done", ""))
    ids = _numbers(query)
    return "" if wording is None or ids is None else wording.format(**ids)


class Notes:
    """Details of recent errors by a random key: the page the browser is sent back to shows the
    inbox's own message ("inbox item 5 is answered …"), never text from the address."""

    def __init__(self) -> None:
        self._notes: OrderedDict[str, str] = OrderedDict()

    def add(self, text: str) -> str:
        key = secrets.token_urlsafe(12)
        self._notes[key] = text
        while len(self._notes) > KEEP:
            self._notes.popitem(last=False)
        return key

    def error_text(self, query: Mapping[str, str]) -> str:
        """The wording of `?error=CODE`, followed by the kept detail `note` names, if any."""
        wording = ERRORS.get(query.get("error", ""))
        if wording is None:
            return ""
        detail = self._notes.get(query.get("note", ""))
        return wording if detail is None else f"{wording} {detail}"
