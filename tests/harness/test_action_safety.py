"""What a model's choice can and cannot make an action do: verify answers, option injection,
URL templates and traversal, secrets by name and their redaction, and what counts as HTTP success."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd import config
from agentd.actions import ActionContext
from agentd.actions.command import CommandExecutor
from agentd.actions.http import HttpExecutor
from agentd.config import CommandAction, HttpAction, Param
from agentd.errors import ActionFailed, ConfigError, ModelOutputInvalid
from agentd.harness.menu import Menu

CTX = ActionContext(run_id=7, goal_id=2, seq=3, action="act")
PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-3f9a7c1e"  # a secret's value: it must never come back out of an executor


def menu_of(actions_toml: str) -> Menu:
    cfg = config.parse(
        '[models.default]\nprovider = "scripted"\nreplies = "r.json"\n'
        + actions_toml
        + '\n[agents.a]\nactions = ["act", "finish"]\n',
        Path("config.toml"),
    )
    return Menu(cfg, cfg.agents["a"])


def load_error(tmp_path: Path, actions_toml: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        '[models.default]\nprovider = "scripted"\nreplies = "r.json"\n'
        + actions_toml
        + '\n[agents.a]\nactions = ["act"]\n'
    )
    with pytest.raises(ConfigError) as e:
        config.load(path)
    return str(e.value)


def secrets(**values: str) -> Any:
    return values.get


class Recorder:
    """An httpx transport that records each request and answers with `status` and an echo."""

    def __init__(self, status: int = 200) -> None:
        self.seen: list[httpx.Request] = []
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        echo = {"url": str(request.url), "auth": request.headers.get("Authorization")}
        return httpx.Response(self.status, json=echo)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


# --- item 7: verify answers with a token, not an exit code -------------------------------------


async def test_verify_crash_with_exit_1_is_unknown_not_done() -> None:
    """An ImportError exits 1: under the old convention that re-ran a payment."""
    crash = [PY, "-c", "import agentd_no_such_module"]
    executor = CommandExecutor(
        "pay", CommandAction(type="command", argv=["/bin/true"], verify_argv=crash)
    )

    assert await executor.verify({}, CTX) is None


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("checking…\ndone\n", True),
        ("not-done\n\n", False),
        ("done\nnot-done\n", False),
        ("done, probably\n", None),
        ("DONE\n", None),
        ("", None),
    ],
)
async def test_verify_reads_the_last_non_empty_line(stdout: str, expected: bool | None) -> None:
    code = f"import sys; sys.stdout.write({stdout!r})"
    executor = CommandExecutor(
        "pay", CommandAction(type="command", argv=["/bin/true"], verify_argv=[PY, "-c", code])
    )

    assert await executor.verify({}, CTX) is expected


def test_demo_service_verify_rollback_prints_its_answer_and_exits_0(tmp_path: Path) -> None:
    def verify(key: str) -> subprocess.CompletedProcess[str]:
        argv = [PY, "-m", "agentd.demo.service", "verify-rollback", "--state", str(tmp_path)]
        env = {**os.environ, "AGENTD_IDEMPOTENCY_KEY": key}
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)

    subprocess.run(
        [PY, "-m", "agentd.demo.service", "deploy", "v2", "--state", str(tmp_path)], check=True
    )
    rollback = [PY, "-m", "agentd.demo.service", "rollback", "--state", str(tmp_path)]
    subprocess.run(
        rollback,
        env={**os.environ, "AGENTD_IDEMPOTENCY_KEY": "1:2"},
        check=True,
        capture_output=True,
    )

    assert (verify("1:2").returncode, verify("1:2").stdout) == (0, "done\n")
    assert (verify("9:9").returncode, verify("9:9").stdout) == (0, "not-done\n")


def test_config_example_restart_is_idempotent_without_a_verify() -> None:
    """`systemctl is-active` said whether the unit runs, not whether the restart happened."""
    restart = config.load(ROOT / "config.example.toml").actions["restart"]

    assert isinstance(restart, CommandAction)
    assert restart.idempotent is True
    assert restart.verify_argv is None


# --- item 8: model-chosen command parameters cannot inject options -----------------------------

TAR = """
[actions.act]
type = "command"
argv = ["tar", "-cf", "/tmp/out.tar", "{path}"]
params = { path = { pattern = "[A-Za-z0-9._/=-]+" } }
"""


def test_menu_pattern_must_match_the_whole_value() -> None:
    menu = menu_of(TAR.replace("[A-Za-z0-9._/=-]+", "[a-z]+"))

    with pytest.raises(ModelOutputInvalid, match="whole pattern"):
        menu.validate_args("act", {"path": "logs; --to-command=sh"})
    assert menu.validate_args("act", {"path": "logs"}) == {"path": "logs"}


def test_menu_refuses_a_value_that_starts_with_a_dash() -> None:
    menu = menu_of(TAR)

    with pytest.raises(ModelOutputInvalid, match="must not start with '-'"):
        menu.validate_args("act", {"path": "--checkpoint-action=exec=id"})


def test_menu_allows_a_leading_dash_when_the_param_opts_in() -> None:
    menu = menu_of(TAR.replace('pattern = "', 'allow_leading_dash = true, pattern = "'))

    assert menu.validate_args("act", {"path": "-x"}) == {"path": "-x"}


def test_menu_schema_shows_the_anchored_pattern() -> None:
    props = menu_of(TAR).describe()[0]["arguments"]

    assert props["path"]["pattern"] == "^(?:[A-Za-z0-9._/=-]+)$"


async def test_command_executor_rechecks_the_dash_on_its_own() -> None:
    params = {"path": Param(pattern="[A-Za-z0-9._/=-]+")}
    executor = CommandExecutor(
        "act", CommandAction(type="command", argv=["/bin/echo", "{path}"], params=params)
    )

    with pytest.raises(ActionFailed, match="must not start with '-'"):
        await executor.execute({"path": "--checkpoint-action=exec=id"}, CTX)


async def test_command_executor_rechecks_the_whole_pattern_on_its_own() -> None:
    params = {"unit": Param(pattern="[a-z]+")}
    executor = CommandExecutor(
        "act", CommandAction(type="command", argv=["/bin/echo", "{unit}"], params=params)
    )

    with pytest.raises(ActionFailed, match="whole pattern"):
        await executor.execute({"unit": "web x"}, CTX)


def test_config_command_param_needs_choices_or_pattern(tmp_path: Path) -> None:
    error = load_error(
        tmp_path, '[actions.act]\ntype = "command"\nargv = ["echo", "{x}"]\nparams = { x = {} }\n'
    )

    assert "actions.act.params" in error and "'x'" in error
    assert "choices" in error and "pattern" in error


def test_config_param_pattern_must_compile(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        '[actions.act]\ntype = "command"\nargv = ["echo", "{x}"]\n'
        'params = { x = { pattern = "[a-" } }\n',
    )

    assert "actions.act.params.x.pattern" in error and "not a usable pattern" in error


# --- item 9: URL templates run, and stay on their host and path --------------------------------

SVC = "http://api.test/v1/svc/{name}/restart"


async def test_http_template_from_the_menu_runs_end_to_end() -> None:
    menu = menu_of(f'[actions.act]\ntype = "http"\nurls = ["{SVC}"]\nparams = {{ name = {{}} }}\n')
    args = menu.validate_args("act", {"url": SVC, "name": "web"})
    recorder = Recorder()
    cfg = menu.config.actions["act"]
    assert isinstance(cfg, HttpAction)

    result = await HttpExecutor("act", cfg, recorder.transport).execute(args, CTX)

    assert result["ok"] is True
    assert [str(r.url) for r in recorder.seen] == ["http://api.test/v1/svc/web/restart"]


@pytest.mark.parametrize(
    "value", ["..", ".", "%2e%2e", "%2E.", "%252e%252e", "a/b", "..%2fadmin", "a\\b", "%5c"]
)
async def test_http_param_that_could_move_the_path_is_refused(value: str) -> None:
    recorder = Recorder()
    cfg = HttpAction(type="http", urls=[SVC], params={"name": Param()})

    with pytest.raises(ActionFailed, match="must not be"):
        await HttpExecutor("act", cfg, recorder.transport).execute({"url": SVC, "name": value}, CTX)
    assert recorder.seen == []


async def test_http_param_is_quoted_as_one_segment() -> None:
    recorder = Recorder()
    cfg = HttpAction(type="http", urls=[SVC], params={"name": Param()})

    await HttpExecutor("act", cfg, recorder.transport).execute({"url": SVC, "name": "a b?c"}, CTX)

    assert recorder.seen[0].url.raw_path == b"/v1/svc/a%20b%3Fc/restart"


async def test_http_filled_url_is_checked_against_the_template_prefix() -> None:
    """Even an operator's secret that climbs out of the prefix is caught by the final check."""
    recorder = Recorder()
    cfg = HttpAction(type="http", urls=["http://api.test/hooks/{secret:HOOK}/x"])
    executor = HttpExecutor("act", cfg, recorder.transport, secrets(HOOK="../../admin"))

    with pytest.raises(ActionFailed, match="leaves its template"):
        await executor.execute({"url": "http://api.test/hooks/{secret:HOOK}/x"}, CTX)
    assert recorder.seen == []


@pytest.mark.parametrize(
    ("urls", "message"),
    [
        ('["http://{host}/x"]', "path and query only"),
        ('["ftp://files.test/x"]', "http:// or https://"),
        ('["http://api.test/{nope}"]', "nope, not a declared param"),
    ],
)
def test_config_url_templates_are_fixed_where_it_matters(
    tmp_path: Path, urls: str, message: str
) -> None:
    error = load_error(
        tmp_path, f'[actions.act]\ntype = "http"\nurls = {urls}\nparams = {{ host = {{}} }}\n'
    )

    assert "actions.act" in error and message in error


# --- item 11: secrets by name, shown by label, redacted from results ---------------------------

HOOK = """
[actions.act]
type = "http"
urls = { hook = "http://hooks.test/services/{secret:HOOK_TOKEN}" }
headers = { Authorization = "Bearer {secret:HOOK_TOKEN}" }
"""


def test_http_menu_offers_labels_not_urls() -> None:
    menu = menu_of(HOOK)

    schema = json.dumps(menu.schema())

    assert '"hook"' in schema and "hooks.test" not in schema
    assert menu.validate_args("act", {"url": "hook"}) == {"url": "hook", "method": "POST"}
    with pytest.raises(ModelOutputInvalid):
        menu.validate_args("act", {"url": "http://hooks.test/services/{secret:HOOK_TOKEN}"})


async def test_http_secret_is_filled_at_execution_and_redacted_from_the_result() -> None:
    recorder = Recorder()
    cfg = menu_of(HOOK).config.actions["act"]
    assert isinstance(cfg, HttpAction)
    executor = HttpExecutor("act", cfg, recorder.transport, secrets(HOOK_TOKEN=TOKEN))

    result = await executor.execute({"url": "hook", "method": "POST"}, CTX)

    sent = recorder.seen[0]
    assert (str(sent.url), sent.headers["Authorization"]) == (
        f"http://hooks.test/services/{TOKEN}",
        f"Bearer {TOKEN}",
    )
    assert result["url"] == "hook"
    assert TOKEN not in json.dumps(result)
    assert json.loads(result["body"]) == {
        "url": "http://hooks.test/services/[secret:HOOK_TOKEN]",
        "auth": "Bearer [secret:HOOK_TOKEN]",
    }


async def test_http_missing_secret_names_the_variable_and_sends_nothing() -> None:
    recorder = Recorder()
    cfg = menu_of(HOOK).config.actions["act"]
    assert isinstance(cfg, HttpAction)

    with pytest.raises(ActionFailed, match=r"\$HOOK_TOKEN is not set"):
        await HttpExecutor("act", cfg, recorder.transport, secrets()).execute({"url": "hook"}, CTX)
    assert recorder.seen == []


async def test_command_secret_env_reaches_the_child_and_is_redacted() -> None:
    code = "import os, sys; t = os.environ['API_TOKEN']; print(t); sys.stderr.write(t)"
    cfg = CommandAction(
        type="command", argv=[PY, "-c", code], secret_env={"API_TOKEN": "PAYMENTS_TOKEN"}
    )
    executor = CommandExecutor("act", cfg, secrets=secrets(PAYMENTS_TOKEN=TOKEN))

    result = await executor.execute({}, CTX)

    assert result["stdout"] == "[secret:PAYMENTS_TOKEN]\n"
    assert result["stderr"] == "[secret:PAYMENTS_TOKEN]"
    assert TOKEN not in json.dumps(result)


async def test_command_secret_echoed_through_a_param_is_redacted_from_argv() -> None:
    cfg = CommandAction(
        type="command",
        argv=["/bin/echo", "{word}"],
        params={"word": Param(pattern="[a-z0-9-]+")},
        secret_env={"API_TOKEN": "PAYMENTS_TOKEN"},
    )
    executor = CommandExecutor("act", cfg, secrets=secrets(PAYMENTS_TOKEN=TOKEN))

    result = await executor.execute({"word": TOKEN}, CTX)

    assert result["argv"] == ["/bin/echo", "[secret:PAYMENTS_TOKEN]"]
    assert TOKEN not in json.dumps(result)


async def test_command_missing_secret_names_the_variable_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cfg = CommandAction(
        type="command", argv=["touch", str(marker)], secret_env={"API_TOKEN": "PAYMENTS_TOKEN"}
    )

    with pytest.raises(ActionFailed, match=r"\$PAYMENTS_TOKEN is not set"):
        await CommandExecutor("act", cfg, secrets=secrets()).execute({}, CTX)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ('argv = ["curl", "-H", "{secret:T}"]', "secret_env"),
        ('argv = ["x"]\nenv = { T = "{secret:T}" }', "secret_env"),
        ('argv = ["x"]\nsecret_env = { AGENTD_RUN_ID = "T" }', "already set"),
        ('argv = ["x"]\nenv = { A = "1" }\nsecret_env = { A = "T" }', "already set"),
    ],
)
def test_config_command_secrets_only_by_secret_env(
    tmp_path: Path, action: str, message: str
) -> None:
    error = load_error(tmp_path, f'[actions.act]\ntype = "command"\n{action}\n')

    assert "actions.act" in error and message in error


def test_config_header_secret_needs_one_host(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        '[actions.act]\ntype = "http"\nurls = ["http://a.test/", "http://b.test/"]\n'
        'headers = { Authorization = "Bearer {secret:T}" }\n',
    )

    assert "several hosts" in error


# --- HTTP success is a 2xx: redirects are not followed -----------------------------------------


@pytest.mark.parametrize(("status", "ok"), [(200, True), (204, True), (302, False), (304, False)])
async def test_http_only_a_2xx_is_ok(status: int, ok: bool) -> None:
    recorder = Recorder(status)
    cfg = HttpAction(type="http", urls=["http://api.test/x"])

    result = await HttpExecutor("act", cfg, recorder.transport).execute(
        {"url": "http://api.test/x"}, CTX
    )

    assert (result["status"], result["ok"]) == (status, ok)


# --- review findings ----------------------------------------------------------------------------


def test_menu_pattern_cannot_backtrack_on_a_hostile_value() -> None:
    # Python's `re` takes seconds to minutes on this (catastrophic backtracking); the menu and
    # the executors use a linear-time engine.
    menu = menu_of(
        '[actions.act]\ntype = "command"\nargv = ["ping", "{host}"]\n'
        'params = { host = { pattern = "([a-zA-Z0-9]+\\\\.?)+" } }\n'
    )
    reply = json.dumps({"reason": "r", "action": {"kind": "act", "host": "a" * 40 + "!"}})
    started = time.perf_counter()
    with pytest.raises(ModelOutputInvalid, match="whole pattern"):
        menu.parse(reply)
    assert time.perf_counter() - started < 5  # backtracking would take minutes
    assert menu.parse(reply.replace("!", ".example")).args == {"host": "a" * 40 + ".example"}


def test_config_pattern_the_linear_engine_cannot_run_is_refused(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        '[actions.act]\ntype = "command"\nargv = ["echo", "{x}"]\n'
        'params = { x = { pattern = "(?=a)a" } }\n',
    )
    assert "look-around" in error


async def test_command_argument_assembled_into_an_option_is_refused() -> None:
    params = {"a": Param(pattern="[a-z]*"), "b": Param(pattern="[a-z=-]+")}
    executor = CommandExecutor(
        "act", CommandAction(type="command", argv=["/bin/echo", "{a}-{b}"], params=params)
    )
    with pytest.raises(ActionFailed, match="would start with '-'"):
        await executor.execute({"a": "", "b": "checkpoint-action=exec=sh"}, CTX)


async def test_command_secret_with_a_newline_is_refused_not_leaked() -> None:
    executor = CommandExecutor(
        "act",
        CommandAction(type="command", argv=["/bin/true"], secret_env={"T": "PAY_TOKEN"}),
        secrets=secrets(PAY_TOKEN=TOKEN + "\n"),
    )
    with pytest.raises(ActionFailed, match="control or non-ASCII") as e:
        await executor.execute({}, CTX)
    assert TOKEN not in str(e.value)
