"""`agentd doctor` finds what would fail at run time, through the real CLI: a URL that is no URL,
a source whose look cannot be made, a program that is missing or not executable, a trigger
nothing emits, a goal whose agent is gone, a negative limit, a corrupt database, a daemon running
an older config — and `--ping` pings every model at once, whatever else failed.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentd.cli import app
from agentd.db import items as qi
from agentd.db import schedules
from agentd.db.store import SyncStore
from tests.conftest import Home, ServeHttp, closed_port, wait_for

_SCRIPT = Path(sys.executable).with_name("agentd")
AGENTD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agentd"]

BASE = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart]
type = "command"
argv = ["true"]

[agents.default]
actions = ["finish", "restart"]
"""
FINISH = {"reason": "ok", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def release(home: Home) -> None:
    """Close the test's own connection (doctor opens its own); the next use opens a new one."""
    home.close()
    home._store = None


def setup(home: Home, extra: str = "", base: str = BASE) -> None:
    home.write_config(base + extra, [FINISH])
    home.store  # noqa: B018  # creates and migrates the database
    release(home)


def doctor(home: Home, *args: str) -> tuple[Result, dict[str, Any]]:
    result = CliRunner().invoke(app, ["--home", str(home.root), "doctor", "--json", *args])
    # The report is the line that is JSON: a model's debug log lines may precede it (the CLI
    # leaves structlog's default, stdout, in place).
    start = result.stdout.find("{\n")
    report = json.loads(result.stdout[start:]) if start >= 0 else {}
    return result, {c["name"]: c for c in report.get("checks", [])}


def test_doctor_healthy_home_lists_programs_and_limits(home: Home) -> None:
    setup(home)

    result, checks = doctor(home)

    assert result.exit_code == 0, result.output
    assert checks["program restart"]["ok"] and "/true" in checks["program restart"]["message"]
    assert checks["limits"]["ok"]
    assert "quick_check ok" in checks["database"]["message"]


def test_doctor_url_that_is_not_a_url_is_a_config_error_with_its_line(home: Home) -> None:
    home.write_config(BASE)
    home.paths.config.write_text(
        BASE + '\n[sources.health]\ntype = "http"\nurl = "not a url"\n'
    )  # line 14

    result = CliRunner().invoke(app, ["--home", str(home.root), "doctor"])

    assert result.exit_code == 2, result.output
    assert "FAIL  config" in result.stdout
    assert "line 14" in result.stdout and "sources.health.url" in result.stdout
    assert "not an http(s) URL" in result.stdout


def test_doctor_source_whose_look_cannot_be_made_fails(home: Home) -> None:
    setup(
        home,
        '\n[sources.probe]\ntype = "command"\nargv = ["/nonexistent/agentd-probe"]\n'
        '\n[sources.site]\ntype = "http"\nurl = "http://agentd-doctor.invalid/health"\n'
        '\n[agents.watch]\nactions = ["finish"]\nsources = ["probe", "site"]\n',
    )

    result, checks = doctor(home)

    assert result.exit_code == 1
    probe, site = checks["source probe"], checks["source site"]
    assert not probe["ok"] and probe["required"] and "check failed" in probe["message"]
    assert not site["ok"] and site["required"] and "cannot resolve host" in site["message"]
    assert not checks["program probe"]["ok"]  # and the program itself is named


def test_doctor_reports_but_does_not_fail_on_tables_no_agent_uses(home: Home) -> None:
    """`agentd init`'s example tables (a refund script, /var/log/syslog) must not fail a new
    home's doctor: what no agent uses is reported, not held against the home."""
    setup(
        home,
        '\n[sources.probe]\ntype = "command"\nargv = ["/nonexistent/agentd-probe"]\n'
        '\n[actions.refund]\ntype = "command"\nargv = ["/nonexistent/refund"]\n',
    )

    result, checks = doctor(home)

    assert result.exit_code == 0, result.output
    for name in ("source probe", "program probe", "program refund"):
        assert not checks[name]["ok"] and not checks[name]["required"], name
        assert "no agent uses it" in checks[name]["message"]


def test_doctor_service_down_is_reported_but_is_no_failure(home: Home) -> None:
    setup(home, f'\n[sources.site]\ntype = "http"\nurl = "http://127.0.0.1:{closed_port()}/"\n')

    result, checks = doctor(home)

    assert result.exit_code == 0, result.output
    site = checks["source site"]
    assert not site["ok"] and not site["required"] and "unhealthy" in site["message"]


def test_doctor_action_program_missing_or_not_executable_fails(home: Home, tmp_path: Path) -> None:
    script = tmp_path / "rollback.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)  # forgot chmod +x
    extra = (
        '\n[actions.page]\ntype = "command"\nargv = ["agentd-no-such-pager", "x"]\n'
        f'\n[actions.rollback]\ntype = "command"\nargv = ["{script}"]\n'
        '\n[agents.ops]\nactions = ["page", "rollback"]\n'
    )
    setup(home, extra)

    result, checks = doctor(home)

    assert result.exit_code == 1
    assert "'agentd-no-such-pager' not found on PATH" in checks["program page"]["message"]
    assert not checks["program rollback"]["ok"]
    assert "not executable" in checks["program rollback"]["message"]


def test_doctor_trigger_naming_an_unknown_source_is_a_config_error(home: Home) -> None:
    home.write_config(BASE)
    home.paths.config.write_text(
        BASE.replace("[agents.default]\n", '[agents.default]\ntriggers = ["helth.unhealthy"]\n')
    )

    result = CliRunner().invoke(app, ["--home", str(home.root), "doctor"])

    assert result.exit_code == 2
    assert "line 10, agents.default.triggers" in result.stdout
    assert "unknown source 'helth'" in result.stdout


def test_doctor_trigger_nothing_emits_is_reported_until_sent(home: Home) -> None:
    setup(
        home, base=BASE.replace("[agents.default]\n", '[agents.default]\ntriggers = ["deploy"]\n')
    )

    _, before = doctor(home)
    home.store.write(lambda c: qi.add_event(c, "deploy", {}, None))
    release(home)
    _, after = doctor(home)

    trigger = before["trigger default"]
    assert not trigger["ok"] and not trigger["required"]
    assert "nothing in agentd emits it" in trigger["message"]
    assert after["trigger default"]["ok"]


def test_doctor_goal_whose_agent_is_gone_fails(home: Home) -> None:
    setup(home, '\n[agents.old]\nactions = ["finish"]\n')
    goal_id = home.add_goal(agent="old")
    release(home)
    home.paths.config.write_text(BASE)  # the agent is removed

    result, checks = doctor(home)

    assert result.exit_code == 1
    assert "agent 'old', gone from the config" in checks[f"goal {goal_id}"]["message"]


def test_doctor_negative_limits_are_caught(home: Home) -> None:
    home.write_config(BASE)
    home.paths.config.write_text(
        BASE + "\n[agents.default.policy]\nmax_per_hour = { restart = -1 }\n"
    )

    in_config = CliRunner().invoke(app, ["--home", str(home.root), "doctor"])

    assert in_config.exit_code == 2
    assert "agents.default.policy.max_per_hour.restart" in in_config.stdout

    setup(home)  # a negative cadence in the database (written past the CLI's checks)
    goal_id = home.add_goal()
    home.store.write(lambda c: schedules.set_overrides(c, goal_id, time.time(), every_s=-60.0))
    release(home)
    result, checks = doctor(home)
    assert result.exit_code == 1
    assert "negative cadence every_s = -60" in checks[f"goal {goal_id}"]["message"]


def test_doctor_runs_quick_check_on_the_database(home: Home) -> None:
    setup(home)
    for _ in range(150):
        home.add_goal(title="x" * 500)
    release(home)
    with sqlite3.connect(home.paths.db) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(home.paths.db.read_bytes())
    for offset in range(len(data) - 8 * 4096, len(data), 7):  # garble the last pages
        data[offset] = 0xAB
    home.paths.db.write_bytes(bytes(data))

    result, checks = doctor(home)

    assert result.exit_code == 1
    assert not checks["database"]["ok"] and "quick_check" in checks["database"]["message"]


# ── --ping ───────────────────────────────────────────────────────────────────────────────────


def test_doctor_ping_runs_even_when_another_check_fails(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTD_TEST_ABSENT_KEY", raising=False)
    remote = (
        '\n[models.remote]\nprovider = "anthropic"\nmodel = "m"\n'
        'api_key_env = "AGENTD_TEST_ABSENT_KEY"\n'
    )
    setup(home, remote)

    result, checks = doctor(home, "--ping")

    assert result.exit_code == 1 and not checks["model remote"]["ok"]
    assert checks["ping default"]["ok"]
    assert "AGENTD_TEST_ABSENT_KEY" in checks["ping remote"]["message"]


def test_doctor_ping_names_the_url_it_could_not_connect_to(home: Home) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    setup(home, f'\n[models.local]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\n')

    result, checks = doctor(home, "--ping")

    assert result.exit_code == 1
    assert not checks["ping local"]["ok"] and url in checks["ping local"]["message"]


COMPLETION = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{
        "index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": '{"summary": "pong"}'},
    }],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}  # fmt: skip


class _Together(BaseHTTPRequestHandler):
    """Answers only once two requests are in flight at the same time: pings one after the
    other would each wait in vain and get a 503."""

    barrier = threading.Barrier(2, timeout=5)
    release: threading.Event

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            type(self).barrier.wait()
            code, body = 200, json.dumps(COMPLETION).encode()
        except threading.BrokenBarrierError:
            code, body = 503, b'{"error": {"message": "alone"}}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_doctor_ping_asks_every_model_at_once(home: Home, http_server: ServeHttp) -> None:
    handler = type("Together", (_Together,), {"barrier": threading.Barrier(2, timeout=5)})
    url = http_server(handler)
    models = "".join(
        f'\n[models.{n}]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}/v1"\n'
        for n in ("one", "two")
    )
    setup(home, models)

    result, checks = doctor(home, "--ping")

    assert checks["ping one"]["ok"], result.output
    assert checks["ping two"]["ok"], checks["ping two"]
    assert result.exit_code == 0, result.output


# ── a running daemon ─────────────────────────────────────────────────────────────────────────


async def cli_doctor(home: Home) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *AGENTD, "--home", str(home.root), "doctor", "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return {c["name"]: c for c in json.loads(out)["checks"]}


async def test_doctor_says_when_the_daemon_runs_another_config(home: Home, serve: Any) -> None:
    setup(home)
    await serve()
    store = SyncStore(home.paths.db)
    try:
        await wait_for(lambda: bool(store.read(lambda c: c.execute(
            "SELECT value FROM meta WHERE key = 'loaded_config_sha256'").fetchone())))  # fmt: skip
    finally:
        store.close()

    same = await cli_doctor(home)
    home.paths.config.write_text(BASE + "\n# an edit not reloaded yet\n")
    changed = await cli_doctor(home)

    assert same["config loaded"]["ok"]
    loaded = changed["config loaded"]
    assert not loaded["ok"] and not loaded["required"]
    assert "is not what the daemon" in loaded["message"]
    assert "`agentd reload`" in loaded["message"] and "kill -HUP" not in loaded["message"]
