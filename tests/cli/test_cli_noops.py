"""Exit codes as the README promises (0 ok, 1 not found or refused, 2 usage or config error), and
repeating a state change that already holds: a note on stderr and exit 0, never an error. Refusals
on closed items say what closed them and why; duplicate events name the first one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.cli.test_cli import CONFIG, REPLIES, agentd, approval, assert_clean_error


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, REPLIES)
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def assert_note(result: Any, *fragments: str) -> None:
    """Exit 0 with a `note:` on stderr."""
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("note: "), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr


def notice(home: Any) -> int:
    return int(home.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="fyi")))


def question(home: Any) -> int:
    return int(home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="why?")))


# ── goals ──────────────────────────────────────────────────────────────────────────────────────


def test_goal_pause_a_paused_goal_is_a_noop_with_a_note(cli_home: Any) -> None:
    goal_id = str(cli_home.add_goal())
    assert agentd(cli_home.root, "goal", "pause", goal_id).exit_code == 0
    assert_note(agentd(cli_home.root, "goal", "pause", goal_id), "already paused")


def test_goal_resume_an_active_goal_is_a_noop_with_a_note(cli_home: Any) -> None:
    goal_id = str(cli_home.add_goal())
    assert_note(agentd(cli_home.root, "goal", "resume", goal_id), "already active")


def test_goal_close_twice_is_a_noop_but_another_ending_is_refused(cli_home: Any) -> None:
    goal_id = str(cli_home.add_goal())
    assert agentd(cli_home.root, "goal", "close", goal_id).exit_code == 0
    assert_note(agentd(cli_home.root, "goal", "close", goal_id), "already achieved")
    again = agentd(cli_home.root, "goal", "close", goal_id, "--abandoned")
    assert_clean_error(again, 1, "closed (achieved)")
    assert_clean_error(agentd(cli_home.root, "goal", "resume", goal_id), 1, "stays closed")


# ── inbox ──────────────────────────────────────────────────────────────────────────────────────


def test_inbox_dismiss_twice_is_a_noop_and_json_still_prints_the_item(cli_home: Any) -> None:
    item_id = str(notice(cli_home))
    assert agentd(cli_home.root, "inbox", "dismiss", item_id, "--reason", "seen").exit_code == 0
    again = agentd(cli_home.root, "inbox", "dismiss", item_id, "--json")
    assert_note(again, "already dismissed (seen)")
    assert json.loads(again.stdout)["status"] == "dismissed"


def test_inbox_deny_twice_is_a_noop_and_approve_after_deny_says_why(cli_home: Any) -> None:
    item_id = str(
        approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    )
    assert agentd(cli_home.root, "inbox", "deny", item_id, "--reason", "not now").exit_code == 0
    assert_note(agentd(cli_home.root, "inbox", "deny", item_id), "already denied (not now)")
    refused = agentd(cli_home.root, "inbox", "approve", item_id)
    assert_clean_error(refused, 1, f"inbox item {item_id} is already denied (not now)")


def test_inbox_approve_twice_is_a_noop(cli_home: Any) -> None:
    item_id = str(
        approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    )
    assert agentd(cli_home.root, "inbox", "approve", item_id).exit_code == 0
    assert_note(agentd(cli_home.root, "inbox", "approve", item_id), "already approved")


def test_inbox_used_approval_says_its_action_ran_not_consumed(cli_home: Any) -> None:
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    cli_home.store.write(lambda c: qi.resolve(c, item_id, InboxStatus.APPROVED, answer="ok"))
    item = cli_home.store.read(lambda c: qi.get_item(c, item_id))
    cli_home.store.write(lambda c: qi.consume_approval(c, item_id, item.digest, "k:1:5"))
    again = agentd(cli_home.root, "inbox", "approve", str(item_id))
    assert_note(again, "was approved and its action has run")
    denied = agentd(cli_home.root, "inbox", "deny", str(item_id))
    assert_clean_error(denied, 1, "was approved and its action has run")
    assert "consumed" not in denied.stderr


def test_inbox_expired_item_is_refused_with_its_reason(cli_home: Any) -> None:
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    reason = "withdrawn: health became healthy"
    cli_home.store.write(lambda c: qi.withdraw_item(c, item_id, reason))
    result = agentd(cli_home.root, "inbox", "approve", str(item_id))
    assert_clean_error(result, 1, f"closed as expired ({reason})")


def test_inbox_same_answer_twice_is_a_noop_another_is_refused(cli_home: Any) -> None:
    item_id = str(question(cli_home))
    assert agentd(cli_home.root, "inbox", "answer", item_id, "because").exit_code == 0
    assert_note(agentd(cli_home.root, "inbox", "answer", item_id, "because"), "already answered")
    other = agentd(cli_home.root, "inbox", "answer", item_id, "something else")
    assert_clean_error(other, 1, "already answered (because)")


def test_inbox_accept_a_nudge_twice_is_a_noop(cli_home: Any) -> None:
    goal_id = cli_home.add_goal()
    nudge = {"topic": "t", "message": "look at it"}
    item_id = cli_home.store.write(
        lambda c: qi.post(c, InboxKind.NOTICE, title="nudge", rule="nudge", goal_id=goal_id,
                          data={"nudge": nudge})
    )  # fmt: skip
    assert agentd(cli_home.root, "inbox", "accept", str(item_id)).exit_code == 0
    assert_note(agentd(cli_home.root, "inbox", "accept", str(item_id)), "already answered")


@pytest.mark.parametrize(
    ("command", "made", "wording"),
    [
        ("approve", question, "is a question, not an approval"),
        ("deny", notice, "is a notice, not an approval"),
    ],
)
def test_inbox_wrong_kind_reads_right(cli_home: Any, command: str, made: Any, wording: str) -> None:
    result = agentd(cli_home.root, "inbox", command, str(made(cli_home)))
    assert_clean_error(result, 1, wording)
    assert " a approval" not in result.stderr


# ── runs ───────────────────────────────────────────────────────────────────────────────────────


def test_runs_cancel_twice_is_a_noop_and_an_ended_run_is_refused(cli_home: Any) -> None:
    run_id = str(cli_home.start_run(cli_home.add_goal()))
    assert agentd(cli_home.root, "runs", "cancel", run_id).exit_code == 0
    again = agentd(cli_home.root, "runs", "cancel", run_id)
    assert again.exit_code == 0 and "already cancelled" in again.stderr, again.output
    ended = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(lambda c: c.execute("UPDATE runs SET status = 'succeeded'"
                                             " WHERE run_id = ?", (ended,)))  # fmt: skip
    assert_clean_error(agentd(cli_home.root, "runs", "cancel", str(ended)), 1, "already ended")


# ── events ─────────────────────────────────────────────────────────────────────────────────────


def test_event_send_duplicate_key_prints_the_existing_id(cli_home: Any) -> None:
    first = agentd(cli_home.root, "event", "send", "deploy", "--key", "d-1")
    agentd(cli_home.root, "event", "send", "other")
    again = agentd(cli_home.root, "event", "send", "deploy", "--key", "d-1")
    assert again.exit_code == 0
    assert again.stdout.strip() == first.stdout.strip() == "1"
    assert "already recorded as event 1" in again.stderr
    as_json = json.loads(
        agentd(cli_home.root, "event", "send", "x", "--key", "d-1", "--json").stdout
    )
    assert (as_json["event_id"], as_json["duplicate"]) == (1, True)


def test_event_send_warns_when_no_agent_triggers_on_it(cli_home: Any) -> None:
    result = agentd(cli_home.root, "event", "send", "alert")
    assert result.exit_code == 0 and result.stdout.strip() == "1"
    assert "warning: no agent triggers on 'alert'" in result.stderr
    assert "reload" in result.stderr


TRIGGERED = CONFIG.replace(
    'actions = ["notify", "ask", "finish", "restart"]',
    'actions = ["notify", "ask", "finish", "restart"]\ntriggers = ["alert"]',
)


def test_event_send_warns_only_for_names_nothing_triggers_on(home: Any) -> None:
    home.write_config(TRIGGERED, REPLIES)
    home.add_goal()
    heard = agentd(home.root, "event", "send", "alert")
    assert heard.exit_code == 0 and heard.stderr == ""
    unheard = agentd(home.root, "event", "send", "alrt")
    assert "warning: no agent triggers on 'alrt'" in unheard.stderr


def test_event_send_says_when_the_triggered_agent_has_no_active_goal(home: Any) -> None:
    home.write_config(TRIGGERED, REPLIES)
    home.store  # noqa: B018  # creates the database
    result = agentd(home.root, "event", "send", "alert")
    assert "default triggers on 'alert' but no active goal uses it" in result.stderr
