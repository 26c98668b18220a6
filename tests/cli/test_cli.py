"""The `agentd` command line against real, migrated SQLite homes in tmp_path (no daemon running)."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentd import config
from agentd.cli import app
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.sqlite import schema
from agentd.db.store import SyncStore
from agentd.errors import UsageError
from agentd.models import (
    InboxKind,
    InboxStatus,
    RunStatus,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)
from agentd.operator.parse import parse_when, pick_agent

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart]
type = "command"
argv = ["true", "{unit}"]
params = { unit = { choices = ["a.service", "b.service"] } }

[agents.default]
actions = ["notify", "ask", "finish", "restart"]

[agents.default.policy]
rules = { restart = "approve" }
"""
REPLIES = [
    {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}
]


@pytest.fixture
def cli_home(home: Any) -> Any:
    """The shared `home` fixture with a valid config and a migrated database."""
    home.write_config(CONFIG, REPLIES)
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def agentd(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(root), *args])


def assert_clean_error(result: Result, code: int, *fragments: str) -> None:
    """Exit `code`, one `agentd: …` message on stderr, no traceback."""
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("agentd: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr


def approval(home: Any, run_id: int, args: dict[str, Any]) -> int:
    return int(
        home.store.write(
            lambda c: qi.post(
                c,
                InboxKind.APPROVAL,
                title="approve restart?",
                body="The run proposes restart.",
                run_id=run_id,
                action="restart",
                args=args,
                digest=action_digest("restart", args),
                rule="policy: restart = approve",
            )
        )
    )


# ── init ──────────────────────────────────────────────────────────────────────────────────────


def test_init_creates_config_replies_and_migrated_database(tmp_path: Path) -> None:
    root = tmp_path / "new-home"
    result = agentd(root, "init")
    assert result.exit_code == 0, result.output
    assert (root / "config.toml").is_file() and (root / "replies.json").is_file()
    assert f"created {root / 'agentd.db'}" in result.stdout
    assert "doctor" in result.stdout and "serve" in result.stdout
    store = SyncStore(root / "agentd.db", migrate_schema=False)
    assert store.read(schema.version) == len(schema.MIGRATIONS)
    store.close()


@pytest.fixture
def umask_022() -> Any:
    """The common default umask, under which files used to come out world-readable."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_init_makes_a_private_home_config_replies_and_database(tmp_path: Path) -> None:
    root = tmp_path / "new-home"
    assert agentd(root, "init").exit_code == 0
    assert mode(root) == 0o700
    for name in ("config.toml", "replies.json", "agentd.db"):
        assert mode(root / name) == 0o600, name
    store = SyncStore(root / "agentd.db")  # kept open: the last close removes -wal and -shm
    store.write(lambda c: q.add_goal(c, title="t", why="w", agent="a", criteria=[], deadline=None))
    assert mode(root / "agentd.db-wal") == 0o600 and mode(root / "agentd.db-shm") == 0o600
    store.close()


@pytest.mark.usefixtures("umask_022")
def test_init_force_makes_an_existing_config_private(tmp_path: Path) -> None:
    root = tmp_path / "h"
    root.mkdir(mode=0o700)
    (root / "config.toml").write_text("# mine\n")
    assert mode(root / "config.toml") == 0o644
    assert agentd(root, "init", "--force").exit_code == 0
    assert mode(root / "config.toml") == 0o600


@pytest.mark.usefixtures("umask_022")
def test_init_in_an_existing_open_home_keeps_its_mode_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir(mode=0o755)
    result = agentd(root, "init")
    assert result.exit_code == 0 and mode(root) == 0o755
    assert f"chmod 700 {root}" in result.stderr


@pytest.mark.parametrize("name", ["a#b%c", "what?mode=ro", "100%25 sure"])
def test_a_home_whose_name_looks_like_uri_syntax_is_used_as_named(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / name
    assert agentd(root, "init").exit_code == 0
    assert agentd(root, "goal", "add", "t", "--why", "w").exit_code == 0
    assert json.loads(agentd(root, "goal", "list", "--json").stdout)[0]["title"] == "t"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no stray database beside it
    assert (root / "agentd.db").is_file()


def test_init_keeps_an_existing_config_unless_forced(tmp_path: Path) -> None:
    root = tmp_path / "h"
    assert agentd(root, "init").exit_code == 0
    (root / "config.toml").write_text("# mine\n")
    kept = agentd(root, "init")
    assert kept.exit_code == 0 and "kept" in kept.stdout and "--force" in kept.stdout
    assert (root / "config.toml").read_text() == "# mine\n"
    assert agentd(root, "init", "--force").exit_code == 0
    assert (root / "config.toml").read_text() != "# mine\n"
    assert (root / "config.toml.bak").read_text() == "# mine\n"


def test_init_under_a_file_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "plain-file").write_text("")
    assert_clean_error(agentd(tmp_path / "plain-file" / "home", "init"), 1, "cannot create")


# ── goals ─────────────────────────────────────────────────────────────────────────────────────


def test_goal_add_list_show_json_round_trip(cli_home: Any) -> None:
    added = agentd(
        cli_home.root,
        "goal", "add", "Keep checkout healthy", "--why", "revenue",
        "--criterion", "p95 < 300ms", "--criterion", "no 5xx",
        "--deadline", "2030-01-02T03:04", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    goal = json.loads(added.stdout)
    assert goal["title"] == "Keep checkout healthy" and goal["agent"] == "default"
    assert goal["criteria"] == ["p95 < 300ms", "no 5xx"]
    assert goal["deadline"] == "2030-01-02T03:04:00Z"

    listed = json.loads(agentd(cli_home.root, "goal", "list", "--json").stdout)
    assert [g["goal_id"] for g in listed] == [goal["goal_id"]]

    shown = json.loads(agentd(cli_home.root, "goal", "show", str(goal["goal_id"]), "--json").stdout)
    assert {k: shown[k] for k in goal} == goal
    assert shown["runs"] == [] and shown["spend"]["tokens"] == 0


def test_goal_add_prints_only_the_id_on_stdout(cli_home: Any) -> None:
    result = agentd(cli_home.root, "goal", "add", "A goal", "--why", "tests")
    assert result.exit_code == 0
    assert result.stdout.strip() == "1"


def test_goal_add_unknown_agent_is_a_usage_error_listing_agents(cli_home: Any) -> None:
    result = agentd(cli_home.root, "goal", "add", "x", "--why", "y", "--agent", "nope")
    assert_clean_error(result, 2, "'nope'", "default")


@pytest.mark.parametrize("when", ["tomorrow", "3x", "2026-13-01", "-3d"])
def test_goal_add_bad_deadline_exits_2_with_an_example(cli_home: Any, when: str) -> None:
    result = agentd(cli_home.root, "goal", "add", "x", "--why", "y", f"--deadline={when}")
    assert_clean_error(result, 2, "--deadline", "3d")


def test_parse_when_accepts_delays_dates_and_naive_times_as_local_time() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_when("3d", now) == now + timedelta(days=3)
    assert parse_when("90m", now) == now + timedelta(minutes=90)
    assert parse_when("2026-03-01", now) == datetime(2026, 3, 1).astimezone(UTC)
    assert parse_when("2026-03-01T17:00+02:00", now) == datetime(2026, 3, 1, 15, tzinfo=UTC)
    with pytest.raises(UsageError):
        parse_when("soon", now)


def test_pick_agent_prefers_the_only_agent_then_default(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    one = config.parse(CONFIG, path)
    assert pick_agent(one, None, path) == "default"
    two = config.parse(CONFIG + '[agents.ops]\nactions = ["finish"]\n', path)
    assert pick_agent(two, None, path) == "default"
    assert pick_agent(two, "ops", path) == "ops"
    no_default = config.parse(
        CONFIG.replace("agents.default", "agents.a") + "[agents.b]\nactions = ['finish']\n", path
    )
    with pytest.raises(UsageError, match=r"pass --agent NAME; .*: a, b"):
        pick_agent(no_default, None, path)


def test_goal_show_unknown_id_exits_1_without_traceback(cli_home: Any) -> None:
    assert_clean_error(agentd(cli_home.root, "goal", "show", "42"), 1, "no goal 42")


def test_goal_show_sums_tokens_of_its_runs(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    cli_home.store.write(
        lambda c: q.append_step(c, run_id, 0, StepKind.DECIDE, tokens_in=100, tokens_out=7)
    )
    shown = json.loads(agentd(cli_home.root, "goal", "show", "1", "--json").stdout)
    assert shown["spend"] == {"tokens_in": 100, "tokens_out": 7, "tokens": 107, "usd": 0.0}
    assert [r["run_id"] for r in shown["runs"]] == [run_id]


def test_goal_close_cancels_its_active_run(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    result = agentd(cli_home.root, "goal", "close", "1", "--abandoned")
    assert result.exit_code == 0, result.output
    assert cli_home.run(run_id).status == RunStatus.CANCELLED
    shown = json.loads(agentd(cli_home.root, "goal", "show", "1", "--json").stdout)
    assert shown["status"] == "abandoned"


def test_malformed_config_exits_2_naming_file_and_line(cli_home: Any) -> None:
    cli_home.paths.config.write_text(CONFIG.replace('replies = "replies.json"', 'replys = "x"'))
    result = agentd(cli_home.root, "goal", "add", "x", "--why", "y")
    assert_clean_error(result, 2, str(cli_home.paths.config), "line 3")


def test_serve_with_a_malformed_config_exits_2_before_starting(cli_home: Any) -> None:
    cli_home.paths.config.write_text("[daemon]\nlog_level = 'loud'\n")
    assert_clean_error(agentd(cli_home.root, "serve"), 2, "line 2", "log_level")


# ── runs ──────────────────────────────────────────────────────────────────────────────────────


def test_run_start_creates_an_operator_run_and_refuses_a_second(cli_home: Any) -> None:
    cli_home.add_goal()
    started = agentd(cli_home.root, "runs", "start", "1", "--json")
    assert started.exit_code == 0, started.output
    run = json.loads(started.stdout)
    assert run["trigger"] == "operator" and run["status"] == "running"
    assert "agentd serve" in started.stderr  # no daemon serves this home
    assert_clean_error(agentd(cli_home.root, "runs", "start", "1"), 1, "already has run")


def test_run_start_on_a_paused_goal_is_refused(cli_home: Any) -> None:
    cli_home.add_goal()
    assert agentd(cli_home.root, "goal", "pause", "1").exit_code == 0
    assert_clean_error(agentd(cli_home.root, "runs", "start", "1"), 1, "paused", "goal resume")


def test_runs_show_renders_the_timeline(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal(title="Keep checkout healthy"))
    args = {"unit": "a.service"}
    long_output = "line of output " * 40

    def journal(c: Any) -> None:
        q.append_step(c, run_id, 0, StepKind.OBSERVE, data={"changes": {"health": [200, 500]}})
        q.append_step(c, run_id, 0, StepKind.DECIDE, action="restart", args=args,
                      data={"reason": "health is 500"}, tokens_in=812, tokens_out=45)  # fmt: skip
        q.append_step(c, run_id, 0, StepKind.CHECK, action="restart", args=args,
                      verdict=Verdict.ALLOW, data={"rule": "policy: restart = allow"})  # fmt: skip
        q.append_step(c, run_id, 0, StepKind.ACT, action="restart", args=args,
                      status=StepStatus.DONE, result={"ok": True, "stdout": long_output})  # fmt: skip

    cli_home.store.write(journal)
    shown = agentd(cli_home.root, "runs", "show", str(run_id))
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "Keep checkout healthy" in text and "[running]" in text
    assert "allow (policy: restart = allow)" in text
    assert 'restart {"unit":"a.service"}' in text and "812/45" in text
    assert "health is 500" in text and "…" in text
    assert max(len(line) for line in text.splitlines()) < 300  # results are cut to one line

    data = json.loads(agentd(cli_home.root, "runs", "show", str(run_id), "--json").stdout)
    assert [s["kind"] for s in data["steps"]] == ["start", "observe", "decide", "check", "act"]
    assert data["steps"][-1]["result"]["stdout"] == long_output  # full in --json
    assert data["goal"]["title"] == "Keep checkout healthy"


def test_runs_list_filters_by_status(cli_home: Any) -> None:
    goal_id = cli_home.add_goal()
    first = cli_home.start_run(goal_id)
    cli_home.store.write(lambda c: q.cancel(c, first, "test"))
    second = cli_home.start_run(goal_id)
    running = json.loads(
        agentd(cli_home.root, "runs", "list", "--status", "running", "--json").stdout
    )
    assert [r["run_id"] for r in running] == [second]
    again = agentd(cli_home.root, "runs", "cancel", str(first))  # already holds: a no-op, exit 0
    assert again.exit_code == 0 and "already cancelled" in again.stderr


def test_runs_list_rejects_an_unknown_status(cli_home: Any) -> None:
    assert agentd(cli_home.root, "runs", "list", "--status", "sleeping").exit_code == 2


# ── inbox ─────────────────────────────────────────────────────────────────────────────────────


def test_inbox_approve_unknown_id_exits_1(cli_home: Any) -> None:
    assert_clean_error(agentd(cli_home.root, "inbox", "approve", "99"), 1, "no inbox item 99")


def test_inbox_approve_a_question_is_refused(cli_home: Any) -> None:
    item_id = cli_home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="why?"))
    result = agentd(cli_home.root, "inbox", "approve", str(item_id))
    assert_clean_error(result, 1, "is a question")


@pytest.mark.parametrize("edit", ["{unit: a}", '["a.service"]'])
def test_inbox_approve_edit_must_be_a_json_object(cli_home: Any, edit: str) -> None:
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    result = agentd(cli_home.root, "inbox", "approve", str(item_id), "--edit", edit)
    assert_clean_error(result, 2, "--edit")
    assert cli_home.store.read(lambda c: qi.get_item(c, item_id)).status == InboxStatus.OPEN


def test_inbox_approve_with_edit_binds_the_edited_arguments(cli_home: Any) -> None:
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    edit = '{"unit": "b.service"}'
    result = agentd(cli_home.root, "inbox", "approve", str(item_id), "--edit", edit)
    assert result.exit_code == 0, result.output
    item = cli_home.store.read(lambda c: qi.get_item(c, item_id))
    assert item.status == InboxStatus.APPROVED and item.args == {"unit": "b.service"}
    assert item.digest == action_digest("restart", {"unit": "b.service"})


def test_inbox_show_and_list_describe_an_approval(cli_home: Any) -> None:
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    shown = agentd(cli_home.root, "inbox", "show", str(item_id)).stdout
    digest = action_digest("restart", {"unit": "a.service"})
    assert "restart" in shown and '"unit": "a.service"' in shown and digest[:12] in shown
    assert "policy: restart = approve" in shown and "The run proposes restart." in shown
    listed = json.loads(agentd(cli_home.root, "inbox", "list", "--json").stdout)
    assert [i["item_id"] for i in listed] == [item_id] and listed[0]["digest"] == digest


def test_inbox_answer_and_deny_close_items(cli_home: Any) -> None:
    question = cli_home.store.write(lambda c: qi.post(c, InboxKind.QUESTION, title="why?"))
    assert agentd(cli_home.root, "inbox", "answer", str(question), "because").exit_code == 0
    item_id = approval(cli_home, cli_home.start_run(cli_home.add_goal()), {"unit": "a.service"})
    assert agentd(cli_home.root, "inbox", "deny", str(item_id), "--reason", "no").exit_code == 0
    closed = json.loads(agentd(cli_home.root, "inbox", "list", "--all", "--json").stdout)
    assert [(i["status"], i["answer"]) for i in closed] == [
        ("answered", "because"),
        ("denied", "no"),
    ]


# ── events ────────────────────────────────────────────────────────────────────────────────────


def test_event_send_twice_with_the_same_key_ignores_the_second(cli_home: Any) -> None:
    first = agentd(cli_home.root, "event", "send", "deploy", "--data", '{"v": 2}', "--key", "d-2")
    assert first.exit_code == 0 and first.stdout.strip() == "1"
    second = agentd(cli_home.root, "event", "send", "deploy", "--key", "d-2")
    assert second.exit_code == 0 and "already recorded as event 1" in second.stderr
    events = json.loads(agentd(cli_home.root, "event", "list", "--json").stdout)
    assert [(e["name"], e["data"], e["dedupe_key"]) for e in events] == [
        ("deploy", {"v": 2}, "d-2")
    ]


def test_event_send_data_must_be_a_json_object(cli_home: Any) -> None:
    assert_clean_error(agentd(cli_home.root, "event", "send", "x", "--data", "[1]"), 2, "--data")


# ── doctor and unusable homes ─────────────────────────────────────────────────────────────────


def test_doctor_json_on_a_healthy_home(cli_home: Any) -> None:
    result = agentd(cli_home.root, "doctor", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert all(checks[n]["ok"] for n in ("config", "database", "schema", "model default"))
    assert checks["daemon"] == {**checks["daemon"], "ok": False, "required": False}


def test_doctor_names_a_missing_api_key_and_never_prints_it(
    cli_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = (
        '[models.remote]\nprovider = "anthropic"\nmodel = "m"\napi_key_env = "AGENTD_TEST_KEY"\n'
    )
    cli_home.paths.config.write_text(CONFIG + remote)
    monkeypatch.delenv("AGENTD_TEST_KEY", raising=False)
    missing = agentd(cli_home.root, "doctor")
    assert missing.exit_code == 1 and "$AGENTD_TEST_KEY is not set" in missing.stdout
    monkeypatch.setenv("AGENTD_TEST_KEY", "sk-very-secret")
    present = agentd(cli_home.root, "doctor", "--json")
    assert present.exit_code == 0 and "sk-very-secret" not in present.output


def test_doctor_accepts_an_embedded_model_without_a_key(cli_home: Any) -> None:
    cli_home.paths.config.write_text(CONFIG + '[models.watch]\nprovider = "runbook"\n')
    result = agentd(cli_home.root, "doctor", "--json")
    assert result.exit_code == 0, result.output
    (check,) = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "model watch"]
    assert check["ok"] is True and "no API key" in check["message"]


def test_doctor_fails_on_a_broken_config(cli_home: Any) -> None:
    cli_home.paths.config.write_text("[daemon]\nbogus = 1\n")
    result = agentd(cli_home.root, "doctor")
    assert result.exit_code == 2  # as every config error (README: exit codes)
    assert "FAIL  config" in result.stdout and "line 2" in result.stdout


def test_commands_without_a_database_point_to_init(tmp_path: Path) -> None:
    assert_clean_error(agentd(tmp_path, "goal", "list"), 1, "agentd.db", "init")


def test_database_that_cannot_be_opened_gives_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "agentd.db").mkdir()  # fails even for root, unlike file permissions
    assert_clean_error(agentd(tmp_path, "inbox", "list"), 1, "agentd.db")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_read_only_database_gives_a_clear_error(cli_home: Any) -> None:
    cli_home.close()
    cli_home.paths.db.chmod(0o444)
    cli_home.root.chmod(0o555)
    try:
        result = agentd(cli_home.root, "goal", "add", "x", "--why", "y")
    finally:
        cli_home.root.chmod(0o755)
        cli_home.paths.db.chmod(0o644)
    assert_clean_error(result, 1, "read-only")


@pytest.mark.parametrize(
    "command",
    [[], ["init"], ["serve"], ["doctor"], ["demo"], ["goal", "add"], ["goal", "close"],
     ["runs", "start"], ["run", "start"], ["runs", "show"], ["status"], ["inbox", "approve"],
     ["event", "send"]],
)  # fmt: skip
def test_every_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], prog_name="agentd")
    assert result.exit_code == 0 and "Usage: agentd" in result.stdout


def test_doctor_reports_a_missing_key_by_name_only(
    cli_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTD_TEST_MISSING_KEY", raising=False)
    extra = (
        '\n[models.claude]\nprovider = "anthropic"\nmodel = "claude-test"\n'
        'api_key_env = "AGENTD_TEST_MISSING_KEY"\n'
    )
    cli_home.paths.config.write_text(cli_home.paths.config.read_text() + extra)
    result = agentd(cli_home.root, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 1 and not checks["model claude"]["ok"]
    assert "AGENTD_TEST_MISSING_KEY" in checks["model claude"]["message"]


def test_doctor_ping_asks_each_model(cli_home: Any) -> None:
    result = agentd(cli_home.root, "doctor", "--ping", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.exit_code == 0 and checks["ping default"]["ok"]


def test_usage_sums_calls_by_goal_model_and_day(cli_home: Any) -> None:
    run_id = cli_home.start_run(cli_home.add_goal())
    for tokens in (100, 50):
        cli_home.store.write(
            lambda c, t=tokens: q.append_step(
                c, run_id, 0, StepKind.DECIDE, tokens_in=t, tokens_out=10,
                data={"model": "claude-test-2026", "cost_usd": 0.001, "tokens_cached": 20},
            )
        )  # fmt: skip
    (row,) = json.loads(agentd(cli_home.root, "usage", "--json").stdout)
    assert row["goal_id"] == 1 and row["model"] == "claude-test-2026" and row["calls"] == 2
    assert (row["tokens_in"], row["tokens_out"], row["tokens_cached"]) == (150, 20, 40)
    assert abs(row["usd"] - 0.002) < 1e-9
    assert "0.0020 USD" in agentd(cli_home.root, "usage").stdout
