"""Day-2 commands that tell the truth: a second goal on a triggered agent is warned about, and an
event nothing listens for suggests the nearest name that something does."""

from __future__ import annotations

from typing import Any

from tests.cli.test_cli import CONFIG, REPLIES, agentd

TRIGGERED = CONFIG.replace(
    'actions = ["notify", "ask", "finish", "restart"]',
    'actions = ["notify", "ask", "finish", "restart"]\ntriggers = ["deploy"]',
)


def test_goal_add_without_agent_warns_when_the_agents_triggers_serve_another_goal(
    home: Any,
) -> None:
    home.write_config(TRIGGERED, REPLIES)
    home.store  # noqa: B018  # creates the database
    first = agentd(home.root, "goal", "add", "Keep checkout up", "--why", "revenue")
    assert first.exit_code == 0 and "warning" not in first.stderr, first.output
    assert "its runs start on its triggers (deploy), or now with `agentd runs start 1`" in (
        " ".join(first.stderr.split())
    )
    second = agentd(home.root, "goal", "add", "Keep checkout fast", "--why", "latency")
    assert second.exit_code == 0 and second.stdout.strip() == "2", second.output
    assert "warning: agent default already serves active goal 1" in second.stderr
    assert "on its triggers (deploy): both goals will run on every trigger" in second.stderr
    third = agentd(home.root, "goal", "add", "Keep checkout cheap", "--why", "cost")
    assert "already serves active goals 1, 2 on its triggers" in third.stderr, third.stderr
    assert "all 3 goals will run on every trigger" in third.stderr
    assert "both" not in third.stderr and "close another goal" in third.stderr


def test_goal_add_names_no_shared_trigger_for_untriggered_or_chosen_agents(home: Any) -> None:
    home.write_config(CONFIG, REPLIES)  # no triggers: nothing starts two runs
    home.store  # noqa: B018  # creates the database
    agentd(home.root, "goal", "add", "one", "--why", "w")
    assert "warning" not in agentd(home.root, "goal", "add", "two", "--why", "w").stderr
    home.write_config(TRIGGERED, REPLIES)
    chosen = agentd(home.root, "goal", "add", "three", "--why", "w", "--agent", "default")
    assert chosen.exit_code == 0 and "warning" not in chosen.stderr


def test_event_send_unheard_suggests_the_nearest_triggered_name(home: Any) -> None:
    home.write_config(TRIGGERED, REPLIES)
    home.add_goal()
    result = agentd(home.root, "event", "send", "deplyo")
    assert result.exit_code == 0 and result.stdout.strip() == "1"
    assert "no agent triggers on 'deplyo'" in result.stderr
    assert "did you mean 'deploy'?" in result.stderr
    assert "then run `agentd reload`" in result.stderr, result.stderr
    far = agentd(home.root, "event", "send", "zzz")
    assert "did you mean" not in far.stderr


def test_event_send_for_a_goal_is_heard_by_its_next_checkin(home: Any) -> None:
    home.write_config(CONFIG, REPLIES)  # no triggers: only the goal's check-in sees it
    home.add_goal()
    seen = agentd(home.root, "event", "send", "note", "--data", '{"goal_id": 1}')
    assert seen.exit_code == 0 and "starts nothing" not in seen.stderr, seen.stderr
    assert "warning" not in seen.stderr
    lost = agentd(home.root, "event", "send", "note", "--data", '{"goal_id": 7}')
    assert lost.exit_code == 0 and "its goal_id 7 names no goal that checks in" in lost.stderr
    assert "(no such goal)" in lost.stderr
