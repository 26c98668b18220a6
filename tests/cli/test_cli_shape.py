"""The CLI fits operators' hands: `--home` anywhere on the line, `--version`, `-h`, shell
completion, `agentd status`, and one `runs` group (with `run start` still working, hidden)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import shellingham
import typer
from typer.testing import CliRunner, Result

import agentd
from agentd.cli import app
from agentd.cli.root import hoist_home
from agentd.daemon import serve as daemon
from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import InboxKind

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["notify", "ask", "finish"]
"""


@pytest.fixture
def cli_home(home: Any) -> Any:
    home.write_config(CONFIG, [])
    home.store  # noqa: B018  # opening the store creates and migrates the database
    return home


def run(*args: str) -> Result:
    """The CLI exactly as typed: no `--home` put in front."""
    return CliRunner().invoke(app, list(args), prog_name="agentd")


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


# ── --home anywhere ───────────────────────────────────────────────────────────────────────────


def test_home_after_the_subcommand_is_the_root_option(cli_home: Any) -> None:
    cli_home.add_goal(title="far")
    listed = json.loads(ok("goal", "list", "--json", "--home", str(cli_home.root)).stdout)
    assert [g["title"] for g in listed] == ["far"]
    inline = json.loads(ok("runs", "list", f"--home={cli_home.root}", "--json").stdout)
    assert inline == []


def test_home_between_a_group_and_its_command(cli_home: Any) -> None:
    cli_home.add_goal(title="mid")
    shown = json.loads(ok("goal", "--home", str(cli_home.root), "show", "1", "--json").stdout)
    assert shown["title"] == "mid"


def test_the_last_home_given_wins(cli_home: Any, tmp_path: Path) -> None:
    elsewhere = tmp_path / "nowhere"
    result = ok("--home", str(elsewhere), "goal", "list", "--json", "--home", str(cli_home.root))
    assert json.loads(result.stdout) == []


def test_home_as_an_options_value_or_after_double_dash_stays_put(cli_home: Any) -> None:
    root = str(cli_home.root)
    added = ok("goal", "add", "t", "--why", "--home", "--home", root, "--json")
    assert json.loads(added.stdout)["why"] == "--home"
    dashed = ok("goal", "add", "--why", "w", "--home", root, "--json", "--", "--home")
    assert json.loads(dashed.stdout)["title"] == "--home"


def test_a_command_with_its_own_home_keeps_it() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    args = ["demo", "--home", "/tmp/demo-home", "--yes"]
    assert hoist_home(root, None, args) == args
    moved = hoist_home(root, None, ["goal", "list", "--home", "/h", "--json"])
    assert moved == ["--home", "/h", "goal", "list", "--json"]


def test_home_without_a_value_is_left_alone_while_completing() -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    completing = SimpleNamespace(resilient_parsing=True)  # what shell completion parses with
    assert hoist_home(root, completing, ["goal", "list", "--home"]) == ["goal", "list", "--home"]


def test_home_without_a_value_is_a_usage_error_from_the_root(cli_home: Any) -> None:
    result = run("goal", "list", "--home")
    assert result.exit_code == 2
    assert "--home" in result.output and "Traceback" not in result.output


# ── --version, -h, completion ─────────────────────────────────────────────────────────────────


def test_version_prints_the_package_version() -> None:
    assert ok("--version").stdout.strip() == f"agentd {agentd.__version__}"


@pytest.mark.parametrize("command", [[], ["runs"], ["runs", "show"], ["goal", "add"], ["status"]])
def test_dash_h_is_help_everywhere(command: list[str]) -> None:
    short, long = ok(*command, "-h").stdout, ok(*command, "--help").stdout
    assert short == long and short.startswith("Usage: agentd")


@pytest.mark.parametrize(
    ("shell", "marks"),
    [("bash", ["_agentd_completion()", "complete -o default"]), ("zsh", ["#compdef agentd"])],
)
def test_shell_completion_is_documented_and_prints_a_script(
    monkeypatch: pytest.MonkeyPatch, shell: str, marks: list[str]
) -> None:
    help_text = ok("--help").stdout
    assert "--install-completion" in help_text and "--show-completion" in help_text
    assert "agentd --install-completion" in help_text  # said how, in the root help
    # `--show-completion` is a flag (a word after it is no shell name): typer asks shellingham,
    # which looks for a shell among this process's first 10 ancestors. Under pytest-xdist, make
    # or a CI runner that is none ("Shell  not supported") or sh ("Shell sh not supported"), so
    # the test says which shell the operator types in, as their terminal would.
    monkeypatch.setattr(shellingham, "detect_shell", lambda *_a, **_k: (shell, f"/bin/{shell}"))
    script = ok("--show-completion").stdout
    assert all(mark in script for mark in marks), script


# ── one `runs` group; `run start` still works ─────────────────────────────────────────────────


def test_runs_start_starts_a_run(cli_home: Any) -> None:
    cli_home.add_goal()
    started = ok("--home", str(cli_home.root), "runs", "start", "1")
    assert started.stdout.strip() == "1" and cli_home.run(1).trigger == "operator"
    assert "deprecated" not in started.stderr
    assert "agentd runs show 1 --follow" in started.stderr  # how to watch it


def test_run_start_still_works_with_a_deprecation_note(cli_home: Any) -> None:
    cli_home.add_goal()
    started = ok("--home", str(cli_home.root), "run", "start", "1")
    assert started.stdout.strip() == "1"
    assert "deprecated" in started.stderr and "agentd runs start" in started.stderr


def test_the_old_run_group_is_hidden_from_help() -> None:
    commands = ok("--help").stdout.split("Commands:")[1]
    names = [line.split()[0] for line in commands.splitlines() if line.strip()]
    assert "runs" in names and "status" in names and "run" not in names


# ── agentd status ─────────────────────────────────────────────────────────────────────────────


def test_status_of_a_quiet_home_says_the_daemon_is_down(cli_home: Any) -> None:
    out = ok("status", "--home", str(cli_home.root)).stdout
    assert "daemon: down" in out and "agentd serve" in out
    assert "0 running" in out and "nothing open" in out


def test_status_counts_runs_inbox_items_and_lists_next_checkins(cli_home: Any) -> None:
    goal_id = cli_home.add_goal(title="watch checkout")
    first = cli_home.start_run(goal_id)
    cli_home.store.write(lambda c: q.cancel(c, first, "test"))
    cli_home.start_run(goal_id)
    look_at = 4_102_444_800.0  # 2100-01-01: far ahead, whatever today is

    def seed(c: Any) -> None:
        qi.post(c, InboxKind.QUESTION, title="which region?", goal_id=goal_id)
        qi.post(c, InboxKind.NOTICE, title="fyi", goal_id=goal_id)
        qc.set_next(c, goal_id, look_at, "first look at a new goal", look_at - 86400)

    cli_home.store.write(seed)
    data = json.loads(ok("status", "--json", "--home", str(cli_home.root)).stdout)
    assert data["daemon"] == {"up": False, "pid": None}
    assert data["runs"]["running"] == 1 and data["runs"]["cancelled"] == 1
    assert data["runs"]["waiting"] == 0 and data["runs"]["succeeded"] == 0
    assert data["inbox"]["open"] == 2
    assert data["inbox"]["question"] == 1 and data["inbox"]["notice"] == 1
    assert [r["status"] for r in data["active_runs"]] == ["running"]
    assert data["next_checkins"] == [  # as the planner has it: after the quiet hours (22-08)
        {"goal_id": goal_id, "title": "watch checkout", "at": "2100-01-01T08:00:00Z",
         "why": "first look at a new goal; it waits for the quiet hours to end at Fri 08:00",
         "by": "cadence", "tz": "UTC"}
    ]  # fmt: skip
    text = ok("status", "--home", str(cli_home.root)).stdout
    assert "1 running" in text and "2 open (1 question, 1 notice)" in text
    assert "watch checkout" in text and "first look at a new goal" in text and "2100" in text


def test_status_says_the_daemon_is_up_while_it_holds_the_home(cli_home: Any) -> None:
    with daemon.home_lock(cli_home.paths):
        data = json.loads(ok("status", "--json", "--home", str(cli_home.root)).stdout)
        text = ok("status", "--home", str(cli_home.root)).stdout
    assert data["daemon"] == {"up": True, "pid": os.getpid()}
    assert f"daemon: up (pid {os.getpid()})" in text


def test_status_without_a_database_points_to_init(tmp_path: Path) -> None:
    result = run("status", "--home", str(tmp_path / "none"))
    assert result.exit_code == 1 and "agentd --home" in result.stderr and "init" in result.stderr


def test_status_with_a_config_that_does_not_load_still_answers(cli_home: Any) -> None:
    cli_home.add_goal(title="watch checkout")
    cli_home.paths.config.write_text("[agents.default\n")  # not TOML
    data = json.loads(ok("status", "--json", "--home", str(cli_home.root)).stdout)
    text = ok("status", "--home", str(cli_home.root)).stdout
    assert data["next_checkins"] == [] and "agentd doctor" in data["next_checkins_error"]
    assert "config.toml does not load" in text.partition("next check-ins:")[2]
