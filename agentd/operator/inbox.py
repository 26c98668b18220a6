"""The operator's side of the inbox: answer questions, approve (optionally with edits) or deny
approvals, dismiss notices, accept or dismiss a check-in's nudge. Each is one short transaction;
the daemon applies it within a second, or at its next start if none runs (one that holds the home
but does not answer, e.g. SIGSTOPped, when it answers again: nothing is lost meanwhile).

Repeating what already holds (dismissing a dismissed notice, approving an approved item, the same
answer twice) raises `Unchanged` (a note, exit 0); anything else on a closed item is refused with
what closed it and why. Texts the operator writes are bounded by TEXT_MAX_CHARS (they reach prompts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentd.db import checkins, memory, stamp
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.errors import ModelOutputInvalid, Refused, Unchanged, UsageError, require_utf8
from agentd.models import JSON, Goal, GoalStatus, InboxItem, InboxKind, InboxStatus, action_digest
from agentd.views.inbox_status import WITHDRAWN, shown_status

if TYPE_CHECKING:
    from agentd.config import Config

TEXT_MAX_CHARS = 4000  # an answer, a reason or a note: the run's prompt quotes it


def check_text(what: str, text: str, *, required: bool) -> str:
    """An operator's text: valid Unicode, at most TEXT_MAX_CHARS, not blank when `required`."""
    require_utf8(what, text)
    if required and not text.strip():
        raise UsageError(f"{what} is empty; say something the run can use")
    if len(text) > TEXT_MAX_CHARS:
        raise UsageError(f"{what} is {len(text):,} characters; at most {TEXT_MAX_CHARS:,} fit")
    return text


def _an(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _closed(item: InboxItem) -> str:
    """Why a closed item cannot take what was asked: its status, and what closed it."""
    said = (item.answer or "").strip().removeprefix("expired: ")
    quoted = f" ({said[:120]}{'…' if len(said) > 120 else ''})" if said else ""
    if item.status == InboxStatus.CONSUMED:
        return f"inbox item {item.item_id} was approved and its action has run"
    if item.status == InboxStatus.EXPIRED:
        return f"inbox item {item.item_id} is closed as expired{quoted}"
    return f"inbox item {item.item_id} is already {item.status}{quoted}"


def _answered(text: str) -> Callable[[InboxItem], bool]:
    return lambda item: item.status == InboxStatus.ANSWERED and item.answer == text


def _open_item(
    c: Any,
    item_id: int,
    kind: InboxKind | None = None,
    repeats: Callable[[InboxItem], bool] = lambda item: False,
) -> InboxItem:
    """The item, if open; closed, `repeats(item)` tells whether it already holds what the caller
    would set (then a no-op: Unchanged), else it is refused with what closed it."""
    item = qi.get_item(c, item_id)
    if kind is not None and item.kind != kind:
        raise Refused(f"inbox item {item_id} is {_an(item.kind)}, not {_an(kind)}")
    if item.status != InboxStatus.OPEN:
        if repeats(item):
            raise Unchanged(f"{_closed(item)}; nothing changed")
        raise Refused(_closed(item))
    return item


def answer(store: SyncStore, item_id: int, text: str, now: float | None = None) -> InboxItem:
    """Answer a question. A check-in's clarifying question (rule `clarify`) becomes part of the
    goal's memory; answering yes to an `achieved` question closes the goal as achieved."""
    check_text("the answer", text, required=True)

    def work(c: Any) -> InboxItem:
        at = stamp.now(c) if now is None else now  # the home's time (agentd/db/stamp.py)
        item = _open_item(c, item_id, InboxKind.QUESTION, _answered(text))
        resolved = qi.resolve(c, item_id, InboxStatus.ANSWERED, answer=text)
        if item.goal_id is not None and item.rule == "clarify":
            said = f"Q: {item.title}{memory.ANSWER_MARK}{text}"
            memory.remember(c, item.goal_id, "answer", said, f"inbox:{item_id}", at)
        elif item.goal_id is not None and item.rule == "achieved":
            _achieved(c, item, text, at)
        return resolved

    return store.write(work)


CONFIRM = frozenset({"yes", "y", "confirm", "confirmed"})


def _achieved(c: Any, item: InboxItem, text: str, now: float) -> None:
    """The operator's word on a check-in's "achieved?": yes closes the goal (cancelling its
    active runs, as `goal close` does); anything else is remembered as what is still missing."""
    assert item.goal_id is not None
    goal = q.get_goal(c, item.goal_id)
    source = f"inbox:{item.item_id}"
    if text.strip().lower().rstrip(".!") not in CONFIRM:
        memory.remember(c, goal.goal_id, "answer", f"not achieved yet: {text}", source, now)
        return
    if goal.status not in (GoalStatus.ACTIVE, GoalStatus.PAUSED):
        return  # closed meanwhile: the answer is recorded, nothing more to do
    q.set_goal_status(c, goal.goal_id, GoalStatus.ACHIEVED)
    reason = f"goal {goal.goal_id} confirmed achieved by the operator"
    for run in q.list_runs(c, goal_id=goal.goal_id, limit=1_000_000):
        if not run.status.finished:
            q.cancel(c, run.run_id, reason)
            qi.withdraw_open_items(c, run.run_id, reason)
    checkins.withdraw_goal_items(c, goal.goal_id, reason, now)
    memory.remember(c, goal.goal_id, "known", "the operator confirmed the goal achieved", source,
                    now)  # fmt: skip


def approve(
    store: SyncStore,
    config: Config | None,
    item_id: int,
    edit: JSON | None = None,
    note: str = "",
    *,
    edit_name: str = "--edit",
) -> InboxItem:
    """Grant an approval for exactly its action and arguments — or for edited arguments, which
    are validated against the action's schema and bound by a new digest (only they need the
    `config`: a plain grant is checked by the daemon's policy when the action runs). An error
    about the edit names it `edit_name`, as the caller's user wrote it (a flag, a form, JSON)."""
    check_text("the note", note, required=False)

    def work(c: Any) -> InboxItem:
        item = _open_item(
            c,
            item_id,
            InboxKind.APPROVAL,
            lambda i: edit is None and i.status in (InboxStatus.APPROVED, InboxStatus.CONSUMED),
        )
        if item.expires_at is not None and item.expires_at.timestamp() <= stamp.now(c):
            # Expired while nobody (or no daemon) closed it: too late to grant, whatever the
            # daemon's state; it will be closed as expired.
            raise Refused(
                f"inbox item {item_id} expired at {item.expires_at:%Y-%m-%d %H:%M:%S} UTC; "
                "it can no longer be approved (the run is told it expired)"
            )
        if edit is None:
            return qi.resolve(c, item_id, InboxStatus.APPROVED, answer=note or "approved")
        if config is None:
            raise UsageError(f"{edit_name} needs the config (the action's schema); none loaded")
        # The action menu's modules (pydantic, the actions): only an edit pays their import.
        from agentd.harness import policy as harness
        from agentd.harness.menu import Menu

        agent = config.agents.get(q.get_run(c, item.run_id).agent) if item.run_id else None
        if agent is None or item.action is None:
            raise Refused(f"inbox item {item_id}: its agent is no longer configured; cannot edit")
        try:
            args = Menu(config, agent).validate_args(item.action, {**(item.args or {}), **edit})
        except ModelOutputInvalid as e:
            raise UsageError(f"{edit_name}: {e}") from None
        return qi.resolve(
            c,
            item_id,
            InboxStatus.APPROVED,
            answer=note or "approved with edits",
            args=args,
            digest=action_digest(item.action, args),
            extra={
                "original_args": item.args,
                "original_digest": item.digest,
                # What the edited arguments will run: the view shows this, never the original's.
                "resolved": harness.resolved(config.action(item.action), item.action, args),
            },
        )

    return store.write(work)


def deny(store: SyncStore, item_id: int, reason: str = "") -> InboxItem:
    check_text("the reason", reason, required=False)

    def work(c: Any) -> InboxItem:
        _open_item(c, item_id, InboxKind.APPROVAL, lambda i: i.status == InboxStatus.DENIED)
        return qi.resolve(c, item_id, InboxStatus.DENIED, answer=reason or "denied by the operator")

    return store.write(work)


def dismiss(
    store: SyncStore, item_id: int, reason: str = "", now: float | None = None
) -> InboxItem:
    """Put a notice away. A dismissed nudge teaches the cadence: the goal's check-ins back off
    one step, and the dismissal (with its reason) joins the goal's memory."""
    check_text("the reason", reason, required=False)

    def work(c: Any) -> InboxItem:
        at = stamp.now(c) if now is None else now  # the home's time (agentd/db/stamp.py)
        item = _open_item(c, item_id, InboxKind.NOTICE, lambda i: i.status == InboxStatus.DISMISSED)
        resolved = qi.resolve(
            c, item_id, InboxStatus.DISMISSED, answer=reason or None, extra={"resolved_at": at}
        )
        if item.rule == "nudge" and item.goal_id is not None:
            if item.data.get("ignored") is None:  # counted as ignored already: one step, not two
                checkins.bump_backoff(c, item.goal_id, at)
            topic = item.data.get("nudge", {}).get("topic")
            why = f": {reason}" if reason else " (no reason given)"
            memory.remember(c, item.goal_id, "dismissed", f"dismissed nudge {item_id} on "
                            f"{topic!r}{why}", f"inbox:{item_id}", at)  # fmt: skip
        return resolved

    return store.write(work)


def accept(store: SyncStore, config: Config, item_id: int, now: float | None = None) -> InboxItem:
    """Accept a check-in's nudge. When it suggests an action, a run of the goal starts whose
    first decision is that action — checked by the harness like any decision (policy, approvals,
    rate limits apply). The returned item's `data["run_id"]` names the run (None without one)."""

    def work(c: Any) -> InboxItem:
        at = stamp.now(c) if now is None else now  # the home's time (agentd/db/stamp.py)
        item = _open_item(c, item_id, InboxKind.NOTICE, _answered("accepted"))
        if item.rule != "nudge" or item.goal_id is None:
            raise Refused(
                f"inbox item {item_id} is not a nudge; only nudges can be accepted "
                f"(`agentd inbox dismiss {item_id}` puts a notice away)"
            )
        goal = q.get_goal(c, item.goal_id)
        if goal.status != GoalStatus.ACTIVE:
            raise Refused(f"goal {goal.goal_id} is {goal.status}; its nudges cannot start runs")
        nudge: JSON = item.data.get("nudge") or {}
        suggested = nudge.get("suggested")
        run_id = _start_suggested(c, config, goal, item_id, suggested) if suggested else None
        resolved = qi.resolve(
            c,
            item_id,
            InboxStatus.ANSWERED,
            answer="accepted",
            extra={"run_id": run_id, "resolved_at": at},
        )
        then = f" → run {run_id}" if run_id else ""
        memory.remember(c, goal.goal_id, "accepted", f"accepted nudge {item_id} on "
                        f"{nudge.get('topic')!r}: {nudge.get('message')}{then}",
                        f"inbox:{item_id}", at)  # fmt: skip
        return resolved

    return store.write(work)


def _start_suggested(c: Any, config: Config, goal: Goal, item_id: int, suggested: JSON) -> int:
    from agentd.harness.menu import Menu

    agent = config.agents.get(goal.agent)
    if agent is None:
        raise Refused(f"goal {goal.goal_id}'s agent {goal.agent!r} is no longer configured")
    action = str(suggested.get("action"))
    try:
        Menu(config, agent).validate_args(action, dict(suggested.get("args") or {}))
    except ModelOutputInvalid as e:
        raise Refused(
            f"nudge {item_id}'s suggestion is not valid under the current config: {e}"
        ) from None
    if (active := q.active_run_of_goal(c, goal.goal_id)) is not None:
        raise Refused(
            f"goal {goal.goal_id} already has run {active}; accept again once it ends, or "
            f"cancel it with `agentd runs cancel {active}`"
        )
    return q.create_run(
        c, goal_id=goal.goal_id, agent=goal.agent, trigger=f"nudge:{item_id}",
        data={"suggested": {"action": action, "args": suggested.get("args") or {}},
              "nudge": item_id},
    )  # fmt: skip


# ── what surfaces read of the inbox ─────────────────────────────────────────────────────────────


KINDS = ("approval", "question", "notice", "nudge")
# "withdrawn": the expired items no one needed any more, as every surface shows them
STATUSES = ("open", "all", *(s.value for s in InboxStatus if s != InboxStatus.OPEN), WITHDRAWN)


@dataclass(frozen=True)
class Filter:
    """Which items `agentd inbox list` shows, as the web inbox's filters: a kind (notice keeps
    nudges too: they are notices), a goal, a status ("open", "all" or one)."""

    kind: str | None = None
    goal_id: int | None = None
    status: str = "open"

    @classmethod
    def parse(cls, kind: str | None, goal_id: int | None, status: str) -> Filter:
        if kind is not None and kind not in KINDS:
            raise UsageError(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
        if status not in STATUSES:
            raise UsageError(f"--status {status!r}: choose one of {', '.join(STATUSES)}")
        return cls(kind, goal_id, status)

    def keeps(self, item: InboxItem) -> bool:
        word = "nudge" if item.rule == "nudge" else str(item.kind)
        if (
            self.kind is not None
            and self.kind != word
            and not (self.kind == "notice" and item.kind == InboxKind.NOTICE)
        ):
            return False
        if self.goal_id is not None and item.goal_id != self.goal_id:
            return False
        if self.status == WITHDRAWN:
            return shown_status(item) == WITHDRAWN
        return self.status in ("all", item.status)

    def columns(self) -> dict[str, Any]:
        """The columns a page of items is narrowed by in the database (agentd/db/pages.py); what
        they cannot say (an expired item shown as withdrawn) `keeps` narrows after."""
        cols: dict[str, Any] = {"status": self.stored, "goal_id": self.goal_id}
        if self.kind == "nudge":
            cols["rule"] = "nudge"
        elif self.kind is not None:
            cols["kind"] = self.kind  # a notice keeps nudges too: they are notices
        return cols

    @property
    def stored(self) -> str | None:
        """The stored status the database narrows to (None: every item)."""
        if self.status == "all":
            return None
        return InboxStatus.EXPIRED.value if self.status == WITHDRAWN else self.status


def items(store: SyncStore, *, show_all: bool = False) -> list[InboxItem]:
    """The open items, oldest first; every item, whatever its status, with `show_all`."""
    return store.read(lambda c: qi.list_items(c, status=None if show_all else "open"))


def filtered(store: SyncStore, wanted: Filter) -> list[InboxItem]:
    """The items `wanted` keeps, oldest first, the database reading only those of its status."""
    return [
        i for i in store.read(lambda c: qi.list_items(c, status=wanted.stored)) if wanted.keeps(i)
    ]


def get_item(store: SyncStore, item_id: int) -> InboxItem:
    """One item (NotFound names `agentd inbox list`)."""
    return store.read(lambda c: qi.get_item(c, item_id))


def item_with_goal(store: SyncStore, item_id: int) -> tuple[InboxItem, Goal | None]:
    """An item and the goal it belongs to (None: a home-wide notice), read together."""

    def read(c: Any) -> tuple[InboxItem, Goal | None]:
        found = qi.get_item(c, item_id)
        return found, None if found.goal_id is None else q.get_goal(c, found.goal_id)

    return store.read(read)


def items_of_run(store: SyncStore, run_id: int, *, show_all: bool = False) -> list[InboxItem]:
    """A run's open items, oldest first; all of them, whatever their status, with `show_all`."""
    return store.read(
        lambda c: qi.list_items(c, status=None if show_all else "open", run_id=run_id)
    )
