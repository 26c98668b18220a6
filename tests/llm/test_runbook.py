"""The runbook decider over hand-built contexts, and the health history it reads (sources/).

Histories are built as real journal Steps and turned into context entries by the engine's own
`context_entry`, so these contexts have exactly the shape the runbook sees in a daemon.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agentd.config import RunbookModel
from agentd.llm.runbook import decide
from agentd.models import JSON, Step, StepKind, StepStatus, Verdict, action_digest
from agentd.runs.model_calls import context_entry
from agentd.sources import changes, transitions, with_history

CFG = RunbookModel(provider="runbook", healthy_checks=2, recheck_s=1.5)
MENU = ["fetch_logs", "restart", "rollback", "sleep", "notify", "ask", "finish"]
SINCE = "2026-01-01T10:00:00+00:00"
FAILING: JSON = {
    "ok": False, "status": 500, "healthy": False, "streak": 4,
    "consecutive_failures": 4, "since": SINCE,
}  # fmt: skip


def healthy(streak: int) -> JSON:
    return {
        "ok": True, "status": 200, "healthy": True, "streak": streak,
        "consecutive_failures": 0, "since": "2026-01-01T10:05:00+00:00",
    }  # fmt: skip


class Journal:
    """A run's journal as the engine writes it; `context` is what the runbook is handed."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        trigger = {
            "trigger": "event:health.unhealthy",
            "event": "health.unhealthy",
            "data": {"source": "health", "healthy": False, "since": SINCE, "status": 500},
        }
        self.add(StepKind.START, data=trigger).observe()

    def add(self, kind: StepKind, *, data: JSON | None = None, **kw: Any) -> Journal:
        now = datetime.now(UTC)
        kw.setdefault("status", StepStatus.DONE)
        seq = len(self.steps) + 1
        self.steps.append(
            Step(
                run_id=1,
                seq=seq,
                kind=kind,
                data=data or {},
                created_at=now,
                completed_at=now,
                **kw,
            )
        )
        return self

    def observe(self) -> Journal:
        return self.add(StepKind.OBSERVE, data={"snapshot_id": len(self.steps), "changes": {}})

    def proposed(self, action: str, verdict: Verdict, **args: Any) -> Journal:
        digest = action_digest(action, args)
        self.add(StepKind.DECIDE, action=action, args=args, digest=digest, data={"reason": "r"})
        return self.add(
            StepKind.CHECK, action=action, args=args, digest=digest, verdict=verdict,
            data={"rule": f"policy: {action} = {verdict}", "escalate": False},
        )  # fmt: skip

    def act(self, action: str, approval: int | None = None, **args: Any) -> Journal:
        """An executed action and the observation after it (sleep: its wait and timer wake)."""
        if approval is None:
            self.proposed(action, Verdict.ALLOW, **args)
        self.add(
            StepKind.ACT, action=action, args=args, digest=action_digest(action, args),
            result={"ok": True}, data={"approval": approval, "key": f"1:{len(self.steps) + 1}"},
        )  # fmt: skip
        if action == "sleep":
            self.add(StepKind.WAIT, data={"kind": "timer", "why": "sleep", "until": 0.0})
            self.add(StepKind.WAKE, data={"woke_by": "timer", "why": "sleep"})
        return self.observe()

    def awaiting_rollback(self) -> Journal:
        self.proposed("rollback", Verdict.APPROVE)
        wait = {"kind": "inbox", "item_id": 1, "why": "approval", "action": "rollback"}
        return self.add(StepKind.WAIT, data=wait)

    def answered(self, status: str) -> Journal:
        """The operator answered the rollback approval (as the scheduler's inbox wake records it)."""
        wake = {
            "woke_by": "inbox", "why": "approval", "item_id": 1, "item_kind": "approval",
            "status": status, "answer": f"{status} by the operator", "action": "rollback",
            "args": {}, "edited": False,
        }  # fmt: skip
        return self.add(StepKind.WAKE, data=wake)

    def asked(self, question: str) -> Journal:
        """An `ask` as the engine journals it: ACT, WAIT on the question, WAKE on the answer."""
        args = {"question": question}
        self.proposed("ask", Verdict.ALLOW, **args)
        self.add(
            StepKind.ACT, action="ask", args=args, digest=action_digest("ask", args),
            result={"ok": True, "item_id": 2}, data={"approval": None, "key": "1:0"},
        )  # fmt: skip
        self.add(StepKind.WAIT, data={"kind": "inbox", "item_id": 2, "why": "question"})
        wake = {
            "woke_by": "inbox", "why": "question", "item_id": 2, "item_kind": "question",
            "status": "answered", "answer": "keep trying", "action": None, "args": None,
            "edited": False,
        }  # fmt: skip
        return self.add(StepKind.WAKE, data=wake).observe()

    def withdrawn(self) -> Journal:
        reason = "withdrawn: health became healthy"
        wake = {
            "woke_by": "world", "why": "approval", "event": "health.healthy", "data": {},
            "withdrew": 1, "action": "rollback", "reason": reason,
        }  # fmt: skip
        return self.add(StepKind.WAKE, data=wake).observe()

    def context(self, health: JSON | None) -> JSON:
        world: JSON = {"service_log": {"lines": ["ERROR payment backend timeout"]}}
        if health is not None:
            world["health"] = health
        return {
            "goal": {"title": "Keep checkout healthy", "why": "revenue"},
            "menu": MENU,
            "world": world,
            "changes": {},
            "history": [context_entry(s) for s in self.steps],
        }


def restarted_and_slept() -> Journal:
    return Journal().act("fetch_logs").act("restart").act("sleep", seconds=1.5)


def action_of(decision: JSON) -> tuple[str, dict[str, Any]]:
    action = dict(decision["action"])
    return action.pop("kind"), action


# ── the runbook's steps ───────────────────────────────────────────────────────────────────────


def test_runbook_unhealthy_without_logs_fetches_logs() -> None:
    decision = decide(CFG, Journal().context(FAILING))
    assert action_of(decision) == ("fetch_logs", {})
    assert SINCE in decision["reason"] and "HTTP 500" in decision["reason"]


def test_runbook_after_fetching_logs_restarts() -> None:
    decision = decide(CFG, Journal().act("fetch_logs").context(FAILING))
    assert action_of(decision) == ("restart", {})


def test_runbook_after_a_restart_sleeps_for_recheck_s() -> None:
    decision = decide(CFG, Journal().act("fetch_logs").act("restart").context(FAILING))
    assert action_of(decision) == ("sleep", {"seconds": 1.5})


def test_runbook_still_failing_after_restart_and_sleep_proposes_rollback() -> None:
    decision = decide(CFG, restarted_and_slept().context(FAILING))
    assert action_of(decision) == ("rollback", {})
    assert "still failing after a restart" in decision["reason"]


def test_runbook_rollback_denied_by_the_harness_asks_the_operator() -> None:
    journal = restarted_and_slept().proposed("rollback", Verdict.DENY).observe()
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert kind == "ask"
    assert "refused" in args["question"]


def test_runbook_rollback_denied_by_the_operator_asks_the_operator() -> None:
    journal = restarted_and_slept().awaiting_rollback().answered("denied").observe()
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert kind == "ask"
    assert "refused" in args["question"]


def test_runbook_rollback_expired_unanswered_counts_as_refused() -> None:
    journal = restarted_and_slept().awaiting_rollback().answered("expired").observe()
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "ask"


def test_runbook_once_asked_and_still_failing_finishes_failed() -> None:
    journal = restarted_and_slept().awaiting_rollback().answered("denied").observe()
    journal.asked("the rollback was refused and … What now?")

    decision = decide(CFG, journal.context(FAILING))

    kind, args = action_of(decision)
    assert kind == "finish", f"the runbook asked again instead of finishing: {decision}"
    assert args["outcome"] == "failed"
    assert "refused" in args["summary"]


def test_runbook_rollback_that_did_not_help_sleeps_then_asks() -> None:
    rolled_back = restarted_and_slept().awaiting_rollback().answered("approved").act("rollback", 1)
    assert action_of(decide(CFG, rolled_back.context(FAILING)))[0] == "sleep"
    rolled_back.act("sleep", seconds=1.5)
    kind, args = action_of(decide(CFG, rolled_back.context(FAILING)))
    assert kind == "ask"
    assert "did not help" in args["question"]


def test_runbook_healthy_below_the_streak_sleeps_to_confirm() -> None:
    decision = decide(CFG, restarted_and_slept().context(healthy(1)))
    assert action_of(decision) == ("sleep", {"seconds": 1.5})


def test_runbook_healthy_streak_reached_finishes_succeeded_with_actions() -> None:
    kind, args = action_of(decide(CFG, restarted_and_slept().context(healthy(2))))
    assert kind == "finish"
    assert args["outcome"] == "succeeded"
    summary = args["summary"]
    assert f"Unhealthy: since {SINCE} (HTTP 500)." in summary
    assert "Actions taken: fetch_logs, restart." in summary
    assert "approved" not in summary and "withdrawn" not in summary


def test_runbook_summary_says_the_rollback_ran_after_approval() -> None:
    journal = restarted_and_slept().awaiting_rollback().answered("approved").act("rollback", 1)
    kind, args = action_of(decide(CFG, journal.context(healthy(3))))
    assert (kind, args["outcome"]) == ("finish", "succeeded")
    assert "Actions taken: fetch_logs, restart, rollback." in args["summary"]
    assert "The rollback ran once, after the operator approved it." in args["summary"]
    assert "withdrawn" not in args["summary"]


def test_runbook_summary_says_the_approval_was_withdrawn() -> None:
    journal = restarted_and_slept().awaiting_rollback().withdrawn()
    kind, args = action_of(decide(CFG, journal.context(healthy(2))))
    assert (kind, args["outcome"]) == ("finish", "succeeded")
    assert "Actions taken: fetch_logs, restart." in args["summary"]
    assert "the approval was withdrawn" in args["summary"]
    assert "approved it" not in args["summary"]


def test_runbook_withdrawn_approval_is_not_a_refusal() -> None:
    # Withdrawn because the service flipped; if it fails again the rollback is still on the table.
    journal = restarted_and_slept().awaiting_rollback().withdrawn()
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "rollback"


@pytest.mark.parametrize("health", [None, {"error": "no answer within 30s"}])
def test_runbook_without_health_data_finishes_failed(health: JSON | None) -> None:
    kind, args = action_of(decide(CFG, Journal().context(health)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "'health'" in args["summary"]


def test_runbook_skips_actions_missing_from_the_menu() -> None:
    ctx = Journal().context(FAILING)
    ctx["menu"] = ["rollback", "sleep", "ask", "finish"]
    assert action_of(decide(CFG, ctx))[0] == "rollback"


# ── health history (sources/) ─────────────────────────────────────────────────────────────────

T0 = 1_767_261_600.0  # 2026-01-01T10:00:00Z


def look(ok: bool, status: int, latency_ms: int = 3) -> JSON:
    return {
        "health": {"ok": ok, "status": status, "latency_ms": latency_ms},
        "log": {"lines": ["a"]},
    }


def test_with_history_first_look_starts_a_streak() -> None:
    world = with_history(None, look(False, 500), T0)
    assert world["health"] == {
        "ok": False, "status": 500, "latency_ms": 3, "healthy": False, "streak": 1,
        "consecutive_failures": 1, "since": "2026-01-01T10:00:00Z", "episode": 1,
    }  # fmt: skip
    assert world["log"] == {"lines": ["a"]}  # no `ok`: passed through untouched


def test_with_history_counts_the_streak_and_keeps_since_while_the_state_holds() -> None:
    world = with_history(None, look(False, 500), T0)
    for _ in range(3):
        world = with_history(world, look(False, 503), T0 + 60)
    assert world["health"]["streak"] == 4
    assert world["health"]["consecutive_failures"] == 4
    assert world["health"]["since"] == "2026-01-01T10:00:00Z"


def test_with_history_flip_restarts_the_streak_and_since() -> None:
    failing = with_history(with_history(None, look(False, 500), T0), look(False, 500), T0 + 1)
    recovered = with_history(failing, look(True, 200), T0 + 90)
    assert recovered["health"]["healthy"] is True
    assert recovered["health"]["streak"] == 1
    assert recovered["health"]["consecutive_failures"] == 0
    assert recovered["health"]["since"] == "2026-01-01T10:01:30Z"
    again = with_history(recovered, look(True, 200), T0 + 120)
    assert (again["health"]["streak"], again["health"]["since"]) == (2, "2026-01-01T10:01:30Z")


def test_transitions_first_seen_failing_is_a_flip() -> None:
    assert transitions(None, with_history(None, look(False, 500), T0)) == [("health", False)]


def test_transitions_first_seen_healthy_is_not_a_flip() -> None:
    assert transitions(None, with_history(None, look(True, 200), T0)) == []


def test_transitions_report_each_flip_once() -> None:
    w1 = with_history(None, look(True, 200), T0)
    w2 = with_history(w1, look(False, 500), T0 + 1)
    w3 = with_history(w2, look(False, 500), T0 + 2)
    w4 = with_history(w3, look(True, 200), T0 + 3)
    assert transitions(w1, w2) == [("health", False)]
    assert transitions(w2, w3) == []
    assert transitions(w3, w4) == [("health", True)]


def test_transitions_ignore_sources_without_health() -> None:
    assert transitions(None, {"log": {"lines": []}, "cmd": {"error": "boom"}}) == []


def test_changes_ignore_counters_and_measurements() -> None:
    w1 = with_history(None, look(False, 500), T0)
    w2 = with_history(w1, look(False, 500, latency_ms=99), T0 + 5)
    assert w2["health"]["streak"] == 2  # the counters did move…
    assert changes(w1, w2) == {}  # …but that alone is not news


def test_changes_report_real_differences_and_new_sources() -> None:
    w1 = with_history(None, look(False, 500), T0)
    w2 = with_history(w1, {**look(True, 200), "deployed": {"output": "v1"}}, T0 + 5)
    diff = changes(w1, w2)
    assert diff["health"] == {"healthy": [False, True], "ok": [False, True], "status": [500, 200]}
    assert diff["deployed"] == "new"
    assert "log" not in diff


def test_changes_from_nothing_marks_every_source_new() -> None:
    assert changes(None, look(True, 200)) == {"health": "new", "log": "new"}


def test_runbook_summary_lists_refused_and_failed_actions_not_only_those_that_ran() -> None:
    journal = restarted_and_slept().proposed("rollback", Verdict.DENY).observe()
    journal.add(
        StepKind.ACT, action="notify", args={}, digest=action_digest("notify", {}),
        status=StepStatus.ERROR, result={"ok": False, "error": "webhook HTTP 500"},
        data={"approval": None, "key": "1:0"},
    )  # fmt: skip
    journal.awaiting_rollback().answered("denied").observe().asked("what now?")
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "Actions taken: fetch_logs, restart, ask." in args["summary"]
    assert "Failed: notify (webhook HTTP 500)." in args["summary"]
    assert (
        "Refused: rollback (policy: rollback = deny), rollback (denied by the operator)."
        in (args["summary"])
    )


def test_mechanical_summary_names_refused_actions() -> None:
    from agentd.llm import mechanical_summary

    journal = restarted_and_slept().proposed("rollback", Verdict.DENY).observe()
    text = mechanical_summary(journal.context(FAILING))
    assert "restart (ok)" in text
    assert "Refused: rollback (policy: rollback = deny)." in text


def test_runbook_summary_says_a_question_was_withdrawn_on_recovery() -> None:
    journal = restarted_and_slept().proposed("rollback", Verdict.DENY).observe()
    wake = {
        "woke_by": "world", "why": "question", "event": "health.healthy", "data": {},
        "withdrew": 2, "action": None, "reason": "withdrawn: health became healthy",
    }  # fmt: skip
    journal.add(StepKind.WAKE, data=wake).observe()
    kind, args = action_of(decide(CFG, journal.context(healthy(2))))
    assert (kind, args["outcome"]) == ("finish", "succeeded")
    assert "the question was withdrawn" in args["summary"]
    assert "the approval was withdrawn" not in args["summary"]
