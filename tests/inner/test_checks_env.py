"""A build's `command` check runs its validator as the harness runs a command: the scrubbed
environment, the config's secrets redacted from its output, the output bounded while it is read,
and what the validator leaves in the background killed when it exits."""

from __future__ import annotations

import json
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.config.build import CommandCheck
from agentd.db import artifacts as qa
from agentd.db import items as qi
from agentd.inner import checks
from agentd.inner import spec as build_spec
from tests.conftest import Home, wait_for, waiting

API_KEY = "sk-ant-api03-FAKEKEY0123456789abcdefFAKE"
SMTP_PASSWORD = "smtp-Pa55word-for-the-relay"

SECRETS_CONFIG = """
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"
request_log = "requests.jsonl"

[models.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"

[notify.mail]
type = "email"
host = "smtp.example.com"
from = "agentd@example.com"
to = ["me@example.com"]
username = "agentd"
password_env = "AGENTD_TEST_SMTP_PASSWORD"

[agents.default]
actions = ["finish"]

[agents.default.build]
max_revisions = 1
plan = false
checks = [{{kind = "command", argv = {argv}, timeout_s = 20}}]
"""

# A validator that shows what it can see: its environment, and a credentials file it reads.
LEAKY = """
import os, sys
from pathlib import Path
env = os.environ
print("key:", env.get("ANTHROPIC_API_KEY"), "smtp:", env.get("AGENTD_TEST_SMTP_PASSWORD"))
print("unrelated:", os.environ.get("AGENTD_TEST_UNRELATED"))
print("read:", Path(sys.argv[2]).read_text())
sys.exit(1)
"""


@pytest.fixture
def secrets_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's environment holds the secrets its config names (and something unrelated)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("AGENTD_TEST_SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("AGENTD_TEST_UNRELATED", "visible-to-the-daemon-only")


def leaky_argv(tmp_path: Path) -> list[str]:
    script = tmp_path / "leaky.py"
    script.write_text(textwrap.dedent(LEAKY))
    creds = tmp_path / "creds.env"
    creds.write_text(f"ANTHROPIC_API_KEY={API_KEY}\nSMTP={SMTP_PASSWORD}\n")
    return [sys.executable, str(script), "{file}", str(creds)]


def write_config(home: Home, argv: list[str]) -> config.Config:
    return home.write_config(SECRETS_CONFIG.format(argv=json.dumps(argv)))


async def check_once(cfg: config.Config, argv: list[str], timeout_s: float = 20) -> Any:
    """One command check through `run_all`, as a build's judge step runs it."""
    build = cfg.agents["default"].build.model_copy(
        update={"checks": [CommandCheck(kind="command", argv=argv, timeout_s=timeout_s)]}
    )
    reqs = [{"id": "C1", "source": "check", "check": 0}]
    return (await checks.run_all(build, reqs, "the artifact", cfg))["C1"]


async def test_a_validator_sees_only_the_scrubbed_environment(
    home: Home, tmp_path: Path, secrets_set: None
) -> None:
    argv = ["sh", "-c", "env; exit 1", "{file}"]
    result = await check_once(write_config(home, argv), argv)
    assert not result["pass"]
    evidence = result["evidence"]
    for leaked in ("ANTHROPIC_API_KEY", API_KEY, "SMTP_PASSWORD", SMTP_PASSWORD, "UNRELATED"):
        assert leaked not in evidence
    assert "PATH=" in evidence  # it did print its environment


async def test_the_configs_secrets_are_redacted_from_a_validators_output(
    home: Home, tmp_path: Path, secrets_set: None
) -> None:
    argv = leaky_argv(tmp_path)
    result = await check_once(write_config(home, argv), argv)
    text = json.dumps(result)
    assert API_KEY not in text and SMTP_PASSWORD not in text
    assert "ANTHROPIC_API_KEY=[secret:ANTHROPIC_API_KEY]" in result["evidence"]
    assert "SMTP=[secret:AGENTD_TEST_SMTP_PASSWORD]" in result["evidence"]
    assert "key: None smtp: None" in result["evidence"]


async def test_a_build_journals_and_prompts_no_secret_a_validator_printed(
    home: Home, tmp_path: Path, secrets_set: None, serve: Any
) -> None:
    argv = leaky_argv(tmp_path)
    write_config(home, argv)
    draft = {"notes": "n", "artifact": "a cover letter"}
    verdict = {"requirements": [{"id": "R1", "pass": True, "evidence": "ok", "fix": "",
                                 "needs_info": False}],
               "serves_why": {"pass": True, "reason": "r", "fix": ""}, "summary": "ok"}  # fmt: skip
    (home.root / "replies.json").write_text(
        json.dumps({"generate": [draft, draft], "judge": [verdict, verdict]})
    )
    goal = home.add_goal(title="write a letter")
    spec = build_spec.make_spec("a cover letter", ["polite"])
    run = home.store.write(lambda c: qa.create_build(c, goal_id=goal, agent="default", spec=spec))
    await serve()
    await wait_for(waiting(home, run), timeout_s=30)  # both versions failed C1: it asks
    versions = home.store.read(lambda c: qa.all_versions(c, run))
    items = [i for i in home.store.read(lambda c: qi.list_items(c)) if i.run_id == run]
    everything = "\n".join([
        json.dumps([v["verdict"] for v in versions]),
        json.dumps([s.data for s in home.steps(run)], default=str),
        "\n".join(f"{i.title}\n{i.body}" for i in items),
        (home.root / "requests.jsonl").read_text(),
    ])  # fmt: skip
    assert API_KEY not in everything and SMTP_PASSWORD not in everything
    assert "[secret:ANTHROPIC_API_KEY]" in everything  # the validator's output got through


async def test_a_validator_printing_50_mb_is_read_in_bounded_memory(home: Home) -> None:
    argv = ["sh", "-c", "yes 0123456789abcdef | head -c 52428800; exit 1", "{file}"]
    cfg = write_config(home, argv)
    tracemalloc.start()
    try:
        result = await check_once(cfg, argv, timeout_s=60)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result["pass"] and result["evidence"].startswith("exit 1: ")
    assert len(result["evidence"]) <= checks.OUTPUT_CHARS + len("exit 1: ")
    assert peak_bytes < 8 * 1024 * 1024  # reading it all would hold 50 MB at least


def _dead(pid: int) -> bool:
    """Gone, or a zombie (killed, waiting only to be reaped by whoever inherited it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def test_a_validators_background_child_dies_when_it_exits(home: Home, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    argv = ["sh", "-c", f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}; exit 0", "{file}"]
    result = await check_once(write_config(home, argv), argv)
    assert result["pass"]
    child = int(pidfile.read_text())
    await wait_for(lambda: _dead(child), timeout_s=5)


async def test_a_background_child_holding_the_output_does_not_hold_the_check(
    home: Home, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    # The child keeps the validator's stdout open: the check ends with the validator anyway.
    argv = ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; echo checked; exit 0", "{file}"]
    result = await check_once(write_config(home, argv), argv, timeout_s=30)
    assert result == {"pass": True, "evidence": "exit 0: checked", "fix": ""}
    await wait_for(lambda: _dead(int(pidfile.read_text())), timeout_s=5)


async def test_a_validator_over_its_timeout_is_killed_with_its_group(
    home: Home, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    argv = ["sh", "-c", f"sleep 300 >/dev/null & echo $! > {pidfile}; sleep 300", "{file}"]
    result = await check_once(write_config(home, argv), argv, timeout_s=0.5)
    assert result == {"pass": False, "evidence": "validator timed out after 0.5s", "fix": ""}
    await wait_for(lambda: _dead(int(pidfile.read_text())), timeout_s=5)
