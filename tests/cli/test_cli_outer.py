"""The outer loop's command line on real, migrated homes (no daemon): `goal schedule|cadence|snooze`,
`goal show` with the next check-in and why, `inbox accept|dismiss`, `checkins`, and the errors that
teach (exit 2 with an example) for bad durations, crons, time zones and quiet hours."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import memory as dbmem
from agentd.db import queries as q
from agentd.db.checkins import CheckinStatus
from agentd.db.schedules import OVERRIDES
from agentd.models import InboxKind, InboxStatus
from agentd.outer import timebase

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
every_s = 86400
min_s = 14400
max_s = 1209600
quiet = "22:00-08:00"
tz = "Europe/Berlin"
jitter_s = 0
"""
REPLIES = [
    {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
]


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, REPLIES)
    home.store  # noqa: B018  # opening the store creates and migrates the database
    home.add_goal(title="find a backend job")
    return home


def agentd(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(root), *args])


def ok(root: Path, *args: str) -> Result:
    result = agentd(root, *args)
    assert result.exit_code == 0, result.output
    return result


def usage_error(result: Result, *fragments: str) -> None:
    """Exit 2, one `agentd: …` line on stderr with an example, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("agentd: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def ts(value: str) -> float:
    """An ISO 8601 time from --json as unix seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def nudge(home: Any, suggested: dict[str, Any] | None) -> int:
    data = {
        "nudge": {"topic": "applications", "message": "Apply to two roles", "suggested": suggested}
    }
    return int(
        home.store.write(
            lambda c: qi.post(
                c, InboxKind.NOTICE, title="Apply to two roles", goal_id=1, rule="nudge", data=data
            )
        )
    )


# ── schedules ───────────────────────────────────────────────────────────────────────────────


def test_goal_schedule_adds_shows_and_removes_schedules(cli_home: Any) -> None:
    added = ok(cli_home.root, "goal", "schedule", "1", "--cron", "0 9 * * mon-fri")
    assert "added schedule 1 to goal 1" in added.stderr
    assert "0 9 * * mon-fri" in added.stdout and "Europe/Berlin" in added.stdout  # agent's tz
    ok(cli_home.root, "goal", "schedule", "1", "--every", "3d", "--misfire", "all", "--cap", "2",
       "--max-late", "12h", "--tz", "UTC")  # fmt: skip
    shown = json.loads(ok(cli_home.root, "goal", "schedule", "1", "--json").stdout)
    cron, every = shown["schedules"]
    assert (cron["kind"], cron["misfire"], cron["max_lateness_s"]) == ("cron", "once", 86400.0)
    assert (every["kind"], every["spec"], every["misfire"], every["misfire_cap"]) == (
        "interval", "259200", "all", 2,
    )  # fmt: skip
    assert every["max_lateness_s"] == 12 * 3600
    fire = ts(every["next_fire_at"])
    assert every["next_fire_at"].endswith("Z")
    assert 3 * 86400 - 5 < fire - ts(shown["now"]) <= 3 * 86400

    removed = ok(cli_home.root, "goal", "schedule", "1", "--remove", "1", "--json")
    assert [s["schedule_id"] for s in json.loads(removed.stdout)["schedules"]] == [2]
    again = agentd(cli_home.root, "goal", "schedule", "1", "--remove", "1")
    assert again.exit_code == 1 and "already removed" in again.stderr


def test_goal_schedule_cron_fires_in_its_time_zone(cli_home: Any) -> None:
    out = json.loads(ok(cli_home.root, "goal", "schedule", "1", "--cron", "30 7 * * *", "--tz",
                        "America/New_York", "--json").stdout)  # fmt: skip
    fire = ts(out["schedules"][0]["next_fire_at"])
    local = datetime.fromtimestamp(fire, ZoneInfo("America/New_York"))
    assert (local.hour, local.minute) == (7, 30)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--cron", "0 25 * * *"], ["--cron", "out of range", "0 9 * * mon-fri"]),
        (["--cron", "every day"], ["--cron", "fields", "e.g."]),
        (["--every", "3 days"], ["--every", "90s, 45m, 4h, 3d, 2w", "e.g. --every 3d"]),
        (["--every", "0s"], ["--every"]),
        (["--every", "1d", "--tz", "Mars/Olympus"], ["--tz", "IANA", "Europe/Berlin"]),
        (["--every", "1d", "--max-late", "soon"], ["--max-late", "duration"]),
        (["--cron", "0 9 * * *", "--every", "1d"], ["not both"]),
        (["--tz", "UTC"], ["add --cron or --every", "agentd goal schedule 3 --cron"]),
    ],
)
def test_goal_schedule_bad_input_exits_2_with_an_example(
    cli_home: Any, args: list[str], fragments: list[str]
) -> None:
    usage_error(agentd(cli_home.root, "goal", "schedule", "1", *args), *fragments)


def test_goal_schedule_bad_misfire_policy_is_a_usage_error(cli_home: Any) -> None:
    result = agentd(cli_home.root, "goal", "schedule", "1", "--every", "1d", "--misfire", "twice")
    assert result.exit_code == 2 and "skip" in result.output and "once" in result.output


def test_goal_schedule_of_an_unknown_goal_exits_1(cli_home: Any) -> None:
    result = agentd(cli_home.root, "goal", "schedule", "9", "--every", "1d")
    assert result.exit_code == 1 and "no goal 9" in result.stderr


def test_removing_another_goals_schedule_is_refused(cli_home: Any) -> None:
    cli_home.add_goal(title="second")
    ok(cli_home.root, "goal", "schedule", "2", "--every", "1d")
    result = agentd(cli_home.root, "goal", "schedule", "1", "--remove", "1")
    assert result.exit_code == 1 and "belongs to goal 2" in result.stderr


# ── cadence and snooze ──────────────────────────────────────────────────────────────────────


def test_goal_cadence_sets_overrides_and_replans_the_next_look(cli_home: Any) -> None:
    out = ok(cli_home.root, "goal", "cadence", "1", "--every", "3d", "--min", "4h", "--max",
             "14d", "--quiet", "23:00-07:30", "--tz", "Asia/Tokyo", "--json")  # fmt: skip
    data = json.loads(out.stdout)
    assert data["cadence"] == {
        "every_s": 3 * 86400.0, "min_s": 4 * 3600.0, "max_s": 14 * 86400.0,
        "quiet": "23:00-07:30", "tz": "Asia/Tokyo", "model": "default",
    }  # fmt: skip
    assert data["next_why"].startswith("cadence changed: every 3d")
    ahead = ts(data["next_at"]) - ts(data["now"])
    assert 3 * 86400 - 5 <= ahead <= 3 * 86400 + 9 * 3600  # quiet hours may shift it
    text = ok(cli_home.root, "goal", "cadence", "1").stdout
    assert "every 3d" in text and "set for this goal: every, min, max, quiet, tz" in text

    reset = json.loads(ok(cli_home.root, "goal", "cadence", "1", "--reset", "--json").stdout)
    assert reset["overrides"] == {} and reset["cadence"]["tz"] == "Europe/Berlin"


def test_goal_cadence_quiet_none_turns_quiet_hours_off(cli_home: Any) -> None:
    data = json.loads(ok(cli_home.root, "goal", "cadence", "1", "--quiet", "none", "--json").stdout)
    assert data["cadence"]["quiet"] is None
    assert "no quiet hours" in ok(cli_home.root, "goal", "cadence", "1").stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--every", "soon"], ["--every", "duration", "e.g. --every 3d"]),
        (["--quiet", "10pm-8am"], ["--quiet", "22:00-08:00", "--quiet none"]),
        (["--quiet", "22:00-22:00"], ["--quiet", "same time"]),
        (["--tz", "Berlin"], ["--tz", "e.g. --tz Europe/Berlin"]),
        (["--min", "2d", "--every", "1d"], ["min ≤ every ≤ max", "agentd goal cadence 3"]),
        (["--max", "1h"], ["min ≤ every ≤ max"]),
    ],
)
def test_goal_cadence_bad_input_exits_2_with_an_example(
    cli_home: Any, args: list[str], fragments: list[str]
) -> None:
    usage_error(agentd(cli_home.root, "goal", "cadence", "1", *args), *fragments)
    row = cli_home.store.read(lambda c: qc.cadence_row(c, 1))  # goal add's row, no override
    assert row is not None and {k: row[k] for k in OVERRIDES} == dict.fromkeys(OVERRIDES)


def test_goal_snooze_pushes_the_next_look_past_it_and_0_ends_it(cli_home: Any) -> None:
    assert "goal 1 snoozed until" in ok(cli_home.root, "goal", "snooze", "1", "2d").stderr
    data = json.loads(ok(cli_home.root, "goal", "snooze", "1", "5d", "--json").stdout)
    until = ts(data["snoozed_until"])
    assert abs(until - ts(data["now"]) - 5 * 86400) < 5
    assert ts(data["next_at"]) >= until
    assert "snoozed until" in data["next_why"]
    ended = json.loads(ok(cli_home.root, "goal", "snooze", "1", "0", "--json").stdout)
    assert ended["snoozed_until"] is None and ts(ended["next_at"]) < until


def test_goal_snooze_bad_duration_exits_2(cli_home: Any) -> None:
    usage_error(
        agentd(cli_home.root, "goal", "snooze", "1", "a while"), "the snooze 'a while'", "e.g."
    )


# ── goal show, the journal ──────────────────────────────────────────────────────────────────


def test_goal_show_tells_the_next_check_in_why_cadence_schedules_and_memory(cli_home: Any) -> None:
    # The schedule's weekday is four days from today, so the 2-day cadence comes first whatever
    # day the suite runs (a fixed Monday came first on a Sunday).
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[(datetime.now().weekday() + 4) % 7]
    spec = f"0 9 * * {day}"
    ok(cli_home.root, "goal", "cadence", "1", "--every", "2d")
    ok(cli_home.root, "goal", "schedule", "1", "--cron", spec)
    cli_home.store.write(lambda c: dbmem.remember(c, 1, "answer", "Q: which city? — A: Berlin",
                                                  "inbox:1", time.time()))  # fmt: skip
    text = ok(cli_home.root, "goal", "show", "1").stdout
    for fragment in ("next check-in:", "why:", "every 2d", "quiet 22:00-08:00", "schedules:",
                     spec, "memory:", "A: Berlin"):  # fmt: skip
        assert fragment in text, text
    data = json.loads(ok(cli_home.root, "goal", "show", "1", "--json").stdout)
    checkin = data["checkin"]
    assert checkin["next_at"] and checkin["next_why"].startswith("cadence changed")
    assert checkin["schedules"][0]["spec"] == spec
    assert checkin["memory"][0]["text"] == "Q: which city? — A: Berlin"


def test_goal_show_before_any_daemon_says_when_the_look_is_planned(cli_home: Any) -> None:
    text = ok(cli_home.root, "goal", "show", "1").stdout
    assert "planned when the daemon next runs" in text


def test_checkins_lists_the_journal_with_reasons(cli_home: Any) -> None:
    now = time.time()
    cli_home.store.write(lambda c: qc.add_due(c, 1, now - 60, now, None, CheckinStatus.MISSED,
                                              "missed (1m late; misfire = skip)"))  # fmt: skip
    text = ok(cli_home.root, "checkins").stdout
    assert "missed" in text and "misfire = skip" in text and "cadence" in text
    rows = json.loads(ok(cli_home.root, "checkins", "--goal", "1", "--json").stdout)
    assert rows[0]["status"] == "missed" and rows[0]["reason"].startswith("missed")
    assert json.loads(ok(cli_home.root, "checkins", "--goal", "1", "--json").stdout)
    missing = agentd(cli_home.root, "checkins", "--goal", "7")
    assert missing.exit_code == 1 and "no goal 7" in missing.stderr


def test_checkins_with_none_yet_says_so(cli_home: Any) -> None:
    assert "no check-ins yet" in ok(cli_home.root, "checkins").stdout


# ── accept and dismiss ──────────────────────────────────────────────────────────────────────


def test_inbox_accept_starts_a_run_with_the_suggested_action(cli_home: Any) -> None:
    item_id = nudge(cli_home, {"action": "notify", "args": {"message": "applied"}})
    out = ok(cli_home.root, "inbox", "accept", str(item_id))
    assert f"accepted item {item_id}: run 1" in out.stdout and "agentd serve" in out.stdout
    run = cli_home.run(1)
    assert run.trigger == f"nudge:{item_id}"
    item = cli_home.store.read(lambda c: qi.get_item(c, item_id))
    assert (item.status, item.answer) == (InboxStatus.ANSWERED, "accepted")


def test_inbox_accept_refuses_what_is_not_a_nudge(cli_home: Any) -> None:
    item_id = cli_home.store.write(
        lambda c: qi.post(c, InboxKind.NOTICE, title="run 1 finished", goal_id=1)
    )
    result = agentd(cli_home.root, "inbox", "accept", str(item_id))
    assert result.exit_code == 1 and "not a nudge" in result.stderr


def test_inbox_dismiss_a_nudge_backs_off_and_remembers_why(cli_home: Any) -> None:
    item_id = nudge(cli_home, None)
    out = ok(cli_home.root, "inbox", "dismiss", str(item_id), "--reason", "already applied")
    assert "check in less often" in out.stdout
    assert cli_home.store.read(lambda c: qc.cadence_row(c, 1))["backoff"] == 1
    memory = cli_home.store.read(lambda c: dbmem.recall(c, 1))
    assert any("already applied" in m["text"] for m in memory)


def test_inbox_dismiss_a_plain_notice_still_works(cli_home: Any) -> None:
    run_id = cli_home.start_run(1)
    item_id = cli_home.store.write(
        lambda c: qi.post(c, InboxKind.NOTICE, title="hi", run_id=run_id)
    )
    out = ok(cli_home.root, "inbox", "dismiss", str(item_id))
    assert out.stdout.strip() == f"dismissed item {item_id}"


# ── the home's clock, help ──────────────────────────────────────────────────────────────────


def test_cli_stamps_on_the_homes_simulated_clock(cli_home: Any) -> None:
    """After `serve --clock-speed`, the CLI's times are the daemon's simulated ones."""
    ahead = 30 * 86400.0
    cli_home.store.write(lambda c: timebase.scaled(c, 3600.0, time.time() - ahead / 3600))
    data = json.loads(ok(cli_home.root, "goal", "snooze", "1", "1d", "--json").stdout)
    assert ts(data["now"]) > time.time() + 29 * 86400
    assert ts(data["snoozed_until"]) - ts(data["now"]) == pytest.approx(86400, abs=1e-3)


def test_serve_rejects_a_bad_clock_speed(cli_home: Any) -> None:
    usage_error(agentd(cli_home.root, "serve", "--clock-speed", "0"), "--clock-speed 3600")


@pytest.mark.parametrize(
    "command",
    [
        ["goal", "schedule"],
        ["goal", "cadence"],
        ["goal", "snooze"],
        ["checkins"],
        ["inbox", "accept"],
        ["inbox", "dismiss"],
        ["serve"],
    ],
)
def test_outer_commands_have_help_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output or "--clock-speed" in result.output


def test_goal_run_via_q_is_untouched(cli_home: Any) -> None:
    """`goal show` still carries runs and spend beside the check-in outlook."""
    cli_home.start_run(1)
    data = json.loads(ok(cli_home.root, "goal", "show", "1", "--json").stdout)
    assert data["runs"][0]["run_id"] == 1 and "spend" in data
    assert cli_home.store.read(lambda c: q.get_goal(c, 1)).title == "find a backend job"


def test_goal_show_and_checkins_neutralise_what_a_model_wrote(cli_home: Any) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07 fine\u202e"
    now = time.time()

    def arrange(c: Any) -> None:
        dbmem.remember(c, 1, "checkin", f"nudged on {hostile}", "checkin:1", now)
        checkin_id = qc.add_due(c, 1, now, now)
        assert checkin_id is not None
        qc.advance(c, checkin_id, "due", status="done", reason=hostile, completed_at=now,
                   decision={"verdict": {"kind": "nudge", "topic": hostile}},
                   effect={"kind": "nudge", "item_id": 1})  # fmt: skip

    cli_home.store.write(arrange)
    for out in (
        ok(cli_home.root, "goal", "show", "1").stdout,
        ok(cli_home.root, "checkins").stdout,
    ):
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b" in out


@pytest.mark.parametrize(
    "args",
    [
        ("goal", "schedule", "1", "--every", "1e12"),
        ("goal", "schedule", "1", "--every", "100000000w"),
        ("goal", "schedule", "1", "--every", "1d", "--max-late", "inf"),
        ("goal", "snooze", "1", "inf"),
        ("goal", "snooze", "1", "99999999999w"),
        ("serve", "--clock-speed", "0.5"),
    ],
)
def test_durations_beyond_reason_exit_2_and_store_nothing(
    cli_home: Any, args: tuple[str, ...]
) -> None:
    result = agentd(cli_home.root, *args)
    assert result.exit_code == 2, result.output
    assert ok(cli_home.root, "goal", "show", "1").exit_code == 0
    schedules = cli_home.store.read(
        lambda c: c.execute("SELECT count(*) FROM schedules").fetchone()
    )
    assert schedules[0] == 0


def test_inbox_accept_and_dismiss_speak_json(cli_home: Any) -> None:
    accepted = nudge(cli_home, {"action": "notify", "args": {"message": "applied"}})
    out = json.loads(ok(cli_home.root, "inbox", "accept", str(accepted), "--json").stdout)
    assert out["item_id"] == accepted and out["data"]["run_id"] == 1
    dismissed = nudge(cli_home, None)
    out = json.loads(
        ok(cli_home.root, "inbox", "dismiss", str(dismissed), "--reason", "no", "--json").stdout
    )
    assert (out["item_id"], out["status"], out["answer"]) == (dismissed, "dismissed", "no")
