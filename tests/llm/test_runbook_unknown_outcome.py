"""After a stop mid-action agentd asks "Did it happen?": the question says which answers it takes,
the runbook reads yes and no (no: it may run the action again, never a failed run), and a summary
never says no action was taken when an intent was journaled."""

from __future__ import annotations

from agentd.llm.runbook import decide
from agentd.models import Step, StepKind, StepStatus, Verdict, action_digest
from agentd.runs import recovery
from tests.llm.test_runbook import CFG, FAILING, Journal, action_of


def restart_unknown() -> Journal:
    """A restart whose intent was journaled when the daemon stopped: recovery recorded its
    outcome as unknown and asked (runs/recovery.py ask_unknown_outcome)."""
    journal = Journal().act("fetch_logs")
    journal.proposed("restart", Verdict.ALLOW)
    return journal.add(
        StepKind.ACT, action="restart", args={}, digest=action_digest("restart", {}),
        status=StepStatus.ERROR, result={"ok": False, "outcome": "unknown", "key": "1:4"},
        data={"approval": None, "key": "1:4"},
    )  # fmt: skip


def answered(journal: Journal, answer: str) -> Journal:
    journal.add(StepKind.WAIT, data={"kind": "inbox", "item_id": 7, "why": "unknown_outcome"})
    wake = {
        "woke_by": "inbox", "why": "unknown_outcome", "item_id": 7, "item_kind": "question",
        "status": "answered", "answer": answer, "action": None, "args": None, "edited": False,
    }  # fmt: skip
    return journal.add(StepKind.WAKE, data=wake).observe()


def test_unknown_outcome_question_says_which_answers_it_takes() -> None:
    step = restart_unknown().steps[-1]
    assert isinstance(step, Step)
    question = recovery.unknown_outcome_question(step, "1:4", None)
    assert "Did it happen? Answer yes" in question
    assert all(f"{word} (" in question for word in ("yes", "no", "stop"))


def test_runbook_unknown_outcome_no_runs_it_again_instead_of_failing() -> None:
    kind, _ = action_of(decide(CFG, answered(restart_unknown(), "no").context(FAILING)))
    assert kind == "fetch_logs"  # it starts over, as retry: the restart comes next


def test_runbook_unknown_outcome_yes_counts_the_action_done() -> None:
    kind, args = action_of(decide(CFG, answered(restart_unknown(), "Yes.").context(FAILING)))
    assert kind == "sleep", f"{kind} {args}"  # give the restart a moment, then look again


def test_runbook_summary_names_an_action_of_unknown_outcome() -> None:
    decision = decide(CFG, answered(restart_unknown(), "stop").context(FAILING))
    kind, args = action_of(decision)
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "No action was taken" not in args["summary"]
    assert "outcome unknown (agentd stopped during it): restart" in args["summary"]
