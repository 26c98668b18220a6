"""The runbook honours the operator's answers (stop, retry, skip) and its questions carry the last
rule or error: over journals shaped by the engine's own `context_entry`, and once through a real
daemon and the CLI against a failing loopback service."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.llm.runbook import decide
from agentd.models import InboxKind, StepKind, StepStatus, Verdict, action_digest
from tests.conftest import wait_for
from tests.llm.test_runbook import CFG, FAILING, Journal, action_of, restarted_and_slept


def answered(journal: Journal, question: str, answer: str | None) -> Journal:
    """An `ask` as the engine journals it, answered (None: the question expired unanswered)."""
    args = {"question": question}
    journal.proposed("ask", Verdict.ALLOW, **args)
    journal.add(
        StepKind.ACT, action="ask", args=args, digest=action_digest("ask", args),
        result={"ok": True, "item_id": 9}, data={"approval": None, "key": "1:0"},
    )  # fmt: skip
    journal.add(StepKind.WAIT, data={"kind": "inbox", "item_id": 9, "why": "question"})
    wake = {
        "woke_by": "inbox", "why": "question", "item_id": 9, "item_kind": "question",
        "status": "answered" if answer is not None else "expired",
        "answer": answer if answer is not None else "expired: no answer in time",
        "action": None, "args": None, "edited": False,
    }  # fmt: skip
    return journal.add(StepKind.WAKE, data=wake).observe()


def rollback_denied() -> Journal:
    journal = restarted_and_slept().awaiting_rollback().answered("denied")
    journal.steps[-1].data["answer"] = "not during the sale"
    return journal.observe()


def failed(journal: Journal, action: str, stderr: str) -> Journal:
    journal.proposed(action, Verdict.ALLOW)
    journal.add(
        StepKind.ACT, action=action, args={}, digest=action_digest(action, {}),
        status=StepStatus.ERROR, result={"ok": False, "exit_code": 5, "stderr": stderr},
        data={"approval": None, "key": "1:0"},
    )  # fmt: skip
    return journal.observe()


# ── questions carry the last rule or error ─────────────────────────────────────────────────────


def test_runbook_question_after_a_denied_rollback_quotes_the_reason_and_the_words() -> None:
    kind, args = action_of(decide(CFG, rollback_denied().context(FAILING)))
    assert kind == "ask"
    assert "denied by the operator (not during the sale)" in args["question"]
    assert "HTTP 500" in args["question"]
    assert all(word in args["question"] for word in ("stop", "retry", "skip"))


def test_runbook_failing_restart_is_asked_about_with_its_error_not_proposed_again() -> None:
    journal = failed(Journal().act("fetch_logs"), "restart", "Unit checkout.service not found.")
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert kind == "ask", f"the runbook proposed {kind} again"
    assert "restart failed (exit code 5: Unit checkout.service not found.)" in args["question"]


def test_runbook_restart_refused_by_policy_is_asked_about_with_the_rule() -> None:
    journal = Journal().act("fetch_logs").proposed("restart", Verdict.DENY).observe()
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert kind == "ask"
    assert "restart was refused (policy: restart = deny)" in args["question"]


def test_runbook_failing_logs_are_skipped_without_asking() -> None:
    journal = failed(Journal(), "fetch_logs", "journalctl: not found")
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "restart"


# ── the answers ────────────────────────────────────────────────────────────────────────────────


def test_runbook_answer_retry_starts_over_and_proposes_the_rollback_again() -> None:
    journal = answered(rollback_denied(), "… What now?", "Retry, please")
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "fetch_logs"
    journal.act("fetch_logs").act("restart").act("sleep", seconds=1.5)
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "rollback"


def test_runbook_answer_skip_goes_on_without_the_refused_restart() -> None:
    journal = Journal().act("fetch_logs").proposed("restart", Verdict.DENY).observe()
    answered(journal, "restart was refused … What now?", "skip")
    assert action_of(decide(CFG, journal.context(FAILING)))[0] == "rollback"


def test_runbook_answer_skip_with_nothing_left_finishes_failed() -> None:
    journal = answered(rollback_denied(), "… What now?", "skip")
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "nothing left to try" in args["summary"]


def test_runbook_answer_stop_finishes_failed_at_once() -> None:
    journal = Journal().act("fetch_logs").proposed("restart", Verdict.DENY).observe()
    answered(journal, "restart was refused … What now?", "stop.")
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert args["summary"].startswith("Stopped: the operator answered 'stop.'")


def test_runbook_unknown_answer_finishes_and_names_the_words() -> None:
    journal = answered(rollback_denied(), "… What now?", "hmm, not sure")
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "'hmm, not sure'" in args["summary"]
    assert "understands stop, retry, skip" in args["summary"]


def test_runbook_question_expired_unanswered_finishes_failed() -> None:
    journal = answered(rollback_denied(), "… What now?", None)
    kind, args = action_of(decide(CFG, journal.context(FAILING)))
    assert (kind, args["outcome"]) == ("finish", "failed")
    assert "(no answer)" in args["summary"]


# ── through a real daemon and the CLI ──────────────────────────────────────────────────────────


class Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"down")

    def log_message(self, *args: Any) -> None:
        pass


CONFIG = """\
[models.default]
provider = "runbook"
recheck_s = 0.1

[sources.health]
type = "http"
url = "{url}/health"
timeout_s = 2.0

[actions.fetch_logs]
type = "command"
argv = ["true"]
idempotent = true

[actions.restart]
type = "command"
argv = ["true"]
idempotent = true

[actions.rollback]
type = "command"
argv = ["true"]
idempotent = true

[agents.default]
sources = ["health"]
actions = ["fetch_logs", "restart", "rollback", "sleep", "ask", "finish"]

[agents.default.policy]
rules = {{ restart = "deny", rollback = "approve" }}
"""


def open_items(home: Any, kind: InboxKind) -> list[Any]:
    return [i for i in home.store.read(lambda c: qi.list_items(c, status="open")) if i.kind == kind]


async def test_runbook_in_a_daemon_asks_once_about_a_refused_restart_and_honours_skip(
    home: Any, serve: Any, http_server: Any
) -> None:
    home.write_config(CONFIG.format(url=http_server(Failing)))
    run_id = home.start_run(home.add_goal())
    await serve()

    await wait_for(lambda: bool(open_items(home, InboxKind.QUESTION)))
    (question,) = open_items(home, InboxKind.QUESTION)
    assert "restart was refused" in question.body and "restart = deny" in question.body
    result = CliRunner().invoke(app, ["--home", str(home.root), "inbox", "answer",
                                      str(question.item_id), "skip"])  # fmt: skip
    assert result.exit_code == 0, result.output

    await wait_for(lambda: bool(open_items(home, InboxKind.APPROVAL)))
    (approval,) = open_items(home, InboxKind.APPROVAL)
    assert approval.action == "rollback"
    steps = home.store.read(lambda c: q.list_steps(c, run_id))
    proposed = [s.action for s in steps if s.kind == StepKind.DECIDE]
    assert proposed == ["fetch_logs", "restart", "ask", "rollback"], json.dumps(proposed)
