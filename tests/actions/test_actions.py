"""The command and http executors against real subprocesses and a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.actions import ActionContext
from agentd.actions.command import CommandExecutor, fill
from agentd.actions.http import HttpExecutor
from agentd.config import CommandAction, HttpAction, Param
from agentd.errors import ActionFailed
from tests.conftest import ServeHttp, closed_port

CTX = ActionContext(run_id=7, goal_id=2, seq=3, action="deploy")
PY = sys.executable
ANY = Param(pattern=r"(?s).*")  # a command param must be constrained; these tests take any value


def command(argv: list[str], **kw: Any) -> CommandExecutor:
    return CommandExecutor("deploy", CommandAction(type="command", argv=argv, **kw))


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def is_dead(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (PID 1 in a container may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def wait_dead(pid: int, bound_s: float = 5.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while not is_dead(pid):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


# A child that starts a grandchild in its own process group, records both pids, then sleeps.
SLEEPER = """
import os, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {grandchild.pid}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""


# --- command: running and results -------------------------------------------------------------


async def test_command_success_reports_output_and_exit_code() -> None:
    result = await command(["/bin/echo", "hello"]).execute({}, CTX)

    assert result["ok"] is True
    assert result["exit_code"] == 0
    assert result["stdout"] == "hello\n"
    assert result["stderr"] == ""
    assert result["truncated"] is False
    assert result["timed_out"] is False
    assert result["argv"] == ["/bin/echo", "hello"]
    assert result["duration_ms"] >= 0


async def test_command_nonzero_exit_is_a_result_not_an_exception() -> None:
    result = await command(py("import sys; sys.stderr.write('boom'); sys.exit(3)")).execute({}, CTX)

    assert result["ok"] is False
    assert result["exit_code"] == 3
    assert result["stderr"] == "boom"


async def test_command_output_keeps_the_tail_when_truncated() -> None:
    code = "import sys; print('a' * 5000 + 'END', end=''); sys.stderr.write('b' * 5000 + 'ERR')"

    result = await command(py(code), output_bytes=10).execute({}, CTX)

    assert result["stdout"] == "aaaaaaaEND"
    assert result["stderr"] == "bbbbbbbERR"
    assert result["truncated"] is True


async def test_command_truncation_drops_a_split_utf8_character() -> None:
    code = "import sys; sys.stdout.buffer.write('é'.encode() * 100)"

    result = await command(py(code), output_bytes=5).execute({}, CTX)

    assert result["stdout"] == "éé"
    assert "\ufffd" not in result["stdout"]


async def test_command_output_not_truncated_when_it_fits() -> None:
    result = await command(py("print('x' * 10, end='')"), output_bytes=10).execute({}, CTX)

    assert result["stdout"] == "x" * 10
    assert result["truncated"] is False


async def test_command_large_output_does_not_deadlock() -> None:
    code = "import sys; sys.stdout.write('x' * 3_000_000); sys.stderr.write('y' * 3_000_000)"

    result = await command(py(code), output_bytes=100).execute({}, CTX)

    assert result["ok"] is True
    assert result["stdout"] == "x" * 100


async def test_command_undecodable_output_is_replaced() -> None:
    result = await command(py("import sys; sys.stdout.buffer.write(b'\\xff\\xfeok')")).execute(
        {}, CTX
    )

    assert result["stdout"] == "\ufffd\ufffdok"


async def test_command_runs_in_configured_cwd(tmp_path: Path) -> None:
    result = await command(py("import os; print(os.getcwd())"), cwd=tmp_path).execute({}, CTX)

    assert result["stdout"].strip() == str(tmp_path.resolve())


async def test_command_stdin_is_devnull() -> None:
    result = await command(py("import sys; print(repr(sys.stdin.read()))")).execute({}, CTX)

    assert result["stdout"].strip() == "''"


# --- command: timeouts and cancellation ---------------------------------------------------------


async def test_command_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # Generous enough for the child to start its grandchild and record the pids.
    executor = command([*py(SLEEPER), str(pids)], timeout_s=2.0)

    result = await executor.execute({}, CTX)

    assert result["timed_out"] is True
    assert result["ok"] is False
    assert result["exit_code"] is None
    child, grandchild = map(int, pids.read_text().split())
    assert await wait_dead(child)
    assert await wait_dead(grandchild)


async def test_command_cancellation_kills_the_process_group_and_propagates(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    executor = command([*py(SLEEPER), str(pids)], timeout_s=60)
    task = asyncio.create_task(executor.execute({}, CTX))
    async with asyncio.timeout(20):
        while not pids.exists():
            await asyncio.sleep(0.01)

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    child, grandchild = map(int, pids.read_text().split())
    assert await wait_dead(child)
    assert await wait_dead(grandchild)


ESCAPER = """
import subprocess, sys
escapee = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
)
print(escapee.pid, flush=True)
"""


async def test_command_descendant_outside_the_group_cannot_hang_it() -> None:
    # The escapee inherits stdout and leaves the group, so EOF never comes and killpg misses it.
    executor = command(py(ESCAPER), timeout_s=0.5)

    result = await executor.execute({}, CTX)

    escapee = int(result["stdout"])
    os.kill(escapee, 9)
    assert result["timed_out"] is True


# --- command: environment -------------------------------------------------------------------------


async def test_command_env_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_TEST_SECRET", "hunter2")
    code = "import os; print(os.environ.get('AGENTD_TEST_SECRET'))"

    result = await command(py(code)).execute({}, CTX)

    assert result["stdout"].strip() == "None"


async def test_command_env_gets_configured_and_base_values() -> None:
    code = "import os; print(os.environ['FROM_CFG'], os.environ['FROM_BASE'])"
    executor = CommandExecutor(
        "deploy",
        CommandAction(type="command", argv=py(code), env={"FROM_CFG": "c"}),
        base_env={"FROM_BASE": "b"},
    )

    result = await executor.execute({}, CTX)

    assert result["stdout"].strip() == "c b"


async def test_command_env_has_default_path_only() -> None:
    code = "import os; print(sorted(k for k in os.environ if not k.startswith('AGENTD_')))"

    result = await command(py(code)).execute({}, CTX)

    assert result["stdout"].strip() in ("['PATH']", "['LC_CTYPE', 'PATH']")


async def test_command_child_sees_idempotency_key_run_and_action() -> None:
    code = (
        "import os; e = os.environ; "
        "print(e['AGENTD_IDEMPOTENCY_KEY'], e['AGENTD_RUN_ID'], e['AGENTD_ACTION'])"
    )

    result = await command(py(code)).execute({}, CTX)

    assert result["stdout"].strip() == "7:3 7 deploy"


async def test_command_config_env_cannot_override_idempotency_key() -> None:
    code = "import os; print(os.environ['AGENTD_IDEMPOTENCY_KEY'])"

    result = await command(py(code), env={"AGENTD_IDEMPOTENCY_KEY": "forged"}).execute({}, CTX)

    assert result["stdout"].strip() == "7:3"


# --- command: placeholders and refusals ------------------------------------------------------------


async def test_command_placeholders_are_filled_from_args() -> None:
    executor = command(["/bin/echo", "svc={service}", "{service}"], params={"service": ANY})

    result = await executor.execute({"service": "web"}, CTX)

    assert result["stdout"] == "svc=web web\n"
    assert result["argv"] == ["/bin/echo", "svc=web", "web"]


async def test_command_placeholder_values_are_not_a_shell_and_not_expanded_again() -> None:
    params = {"a": ANY, "b": ANY}
    executor = command(["/bin/echo", "{a}", "{b}"], params=params)

    result = await executor.execute({"a": "{b}; echo pwned $(id)", "b": "x"}, CTX)

    assert result["stdout"] == "{b}; echo pwned $(id) x\n"


async def test_command_undeclared_braces_are_left_alone() -> None:
    result = await command(["/bin/echo", "{}", "{other}", "{a: .b}"]).execute({}, CTX)

    assert result["stdout"] == "{} {other} {a: .b}\n"


async def test_command_missing_placeholder_value_raises_action_failed() -> None:
    executor = command(["/bin/echo", "{service}"], params={"service": ANY})

    with pytest.raises(ActionFailed, match="service"):
        await executor.execute({}, CTX)


async def test_command_non_string_placeholder_value_raises_action_failed() -> None:
    executor = command(["/bin/echo", "{n}"], params={"n": ANY})

    with pytest.raises(ActionFailed, match="string"):
        await executor.execute({"n": 5}, CTX)


async def test_command_undeclared_argument_raises_action_failed() -> None:
    with pytest.raises(ActionFailed, match="evil"):
        await command(["/bin/echo"]).execute({"evil": "x"}, CTX)


async def test_command_missing_executable_raises_action_failed() -> None:
    executor = command(["/nonexistent/agentd-no-such-tool", "x"])

    with pytest.raises(ActionFailed, match=r"agentd-no-such-tool.*No such file"):
        await executor.execute({}, CTX)


async def test_command_missing_cwd_raises_action_failed(tmp_path: Path) -> None:
    executor = command(["/bin/echo"], cwd=tmp_path / "gone")

    with pytest.raises(ActionFailed, match="gone"):
        await executor.execute({}, CTX)


async def test_command_nul_byte_in_argument_raises_action_failed() -> None:
    executor = command(["/bin/echo", "{a}"], params={"a": ANY})

    with pytest.raises(ActionFailed, match="null byte"):
        await executor.execute({"a": "x\x00y"}, CTX)


def test_command_idempotent_flag_comes_from_config() -> None:
    assert command(["/bin/true"], idempotent=True).idempotent is True
    assert command(["/bin/true"]).idempotent is False


def test_fill_quotes_values_with_the_given_function() -> None:
    assert fill("/x/{a}", {"a": "b/c"}, ["a"], quote=lambda v: v.replace("/", "%2F")) == "/x/b%2Fc"


# --- command: verify -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "exit_code", "expected"),
    [
        ("done", 0, True),
        ("not-done", 0, False),
        ("", 0, None),
        ("done", 1, None),
        ("not-done", 1, None),
        ("not-done", 2, None),
        ("done", -9, None),
    ],
)
async def test_command_verify_needs_exit_0_and_an_answer(
    answer: str, exit_code: int, expected: bool | None
) -> None:
    code = (
        f"import os, signal, sys; c = {exit_code}; print({answer!r}, flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL) if c < 0 else sys.exit(c)"
    )
    executor = command(["/bin/true"], verify_argv=py(code))

    assert await executor.verify({}, CTX) is expected


async def test_command_verify_sees_idempotency_key_and_args() -> None:
    code = (
        "import os, sys; "
        "print('done' if os.environ['AGENTD_IDEMPOTENCY_KEY'] == '7:3' and sys.argv[1] == 'web' "
        "else 'not-done')"
    )
    executor = command(["/bin/true"], params={"service": ANY}, verify_argv=[*py(code), "{service}"])

    assert await executor.verify({"service": "web"}, CTX) is True
    assert await executor.verify({"service": "db"}, CTX) is False


async def test_command_verify_without_verify_argv_is_unknown() -> None:
    assert await command(["/bin/true"]).verify({}, CTX) is None


async def test_command_verify_missing_executable_is_unknown() -> None:
    executor = command(["/bin/true"], verify_argv=["/nonexistent/agentd-verify"])

    assert await executor.verify({}, CTX) is None


async def test_command_verify_timeout_is_unknown() -> None:
    executor = command(["/bin/true"], verify_argv=py("import time; time.sleep(60)"), timeout_s=0.3)

    assert await executor.verify({}, CTX) is None


# --- http: a real loopback server ------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        if self.path == "/slow":
            self.release.wait(30)
        if self.path.startswith("/status/"):
            code = int(self.path.rsplit("/", 1)[1])
            payload = b"status"
        else:
            code = 200
            echo = {
                "method": self.command,
                "path": self.path,
                "key": self.headers.get("Idempotency-Key"),
                "body": body,
            }
            payload = json.dumps(echo).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = _reply

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(http_server: ServeHttp) -> str:
    return http_server(_Handler)


def http(urls: list[str], **kw: Any) -> HttpExecutor:
    return HttpExecutor("hook", HttpAction(type="http", urls=urls, **kw))


async def test_http_posts_body_with_idempotency_key(server: str) -> None:
    executor = http([f"{server}/hook"])

    result = await executor.execute({"url": f"{server}/hook", "method": "POST", "body": "hi"}, CTX)

    assert result["ok"] is True
    assert result["status"] == 200
    assert result["latency_ms"] >= 0
    assert json.loads(result["body"]) == {
        "method": "POST",
        "path": "/hook",
        "key": "7:3",
        "body": "hi",
    }


async def test_http_method_defaults_when_only_one_is_allowed(server: str) -> None:
    result = await http([f"{server}/hook"]).execute({"url": f"{server}/hook"}, CTX)

    assert json.loads(result["body"])["method"] == "POST"


async def test_http_error_status_is_a_result(server: str) -> None:
    url = f"{server}/status/503"

    result = await http([url]).execute({"url": url, "method": "POST"}, CTX)

    assert result["ok"] is False
    assert result["status"] == 503


async def test_http_url_template_is_filled_with_the_param(server: str) -> None:
    template = f"{server}/svc/{{name}}/restart"
    executor = http([template], params={"name": Param()})

    result = await executor.execute({"url": template, "method": "POST", "name": "web"}, CTX)

    assert json.loads(result["body"])["path"] == "/svc/web/restart"
    assert result["url"] == template


async def test_http_url_not_on_allowlist_raises_action_failed(server: str) -> None:
    executor = http([f"{server}/hook"])

    with pytest.raises(ActionFailed, match="allowlist"):
        await executor.execute({"url": f"{server}/admin", "method": "POST"}, CTX)


async def test_http_filled_in_url_is_not_a_template(server: str) -> None:
    executor = http([f"{server}/svc/{{name}}"], params={"name": Param()})

    with pytest.raises(ActionFailed, match="allowlist"):
        await executor.execute({"url": f"{server}/svc/web", "method": "POST", "name": "web"}, CTX)


async def test_http_param_cannot_traverse_the_path(server: str) -> None:
    template = f"{server}/svc/{{name}}"
    executor = http([template], params={"name": Param()})

    with pytest.raises(ActionFailed, match=r"'\.\.'"):
        await executor.execute({"url": template, "method": "POST", "name": "../admin"}, CTX)


async def test_http_method_not_allowed_raises_action_failed(server: str) -> None:
    executor = http([f"{server}/hook"], methods=["POST"])

    with pytest.raises(ActionFailed, match="DELETE"):
        await executor.execute({"url": f"{server}/hook", "method": "DELETE"}, CTX)


async def test_http_non_string_body_raises_action_failed(server: str) -> None:
    with pytest.raises(ActionFailed, match="body"):
        await http([f"{server}/hook"]).execute(
            {"url": f"{server}/hook", "method": "POST", "body": {"a": 1}}, CTX
        )


async def test_http_timeout_is_a_result(server: str) -> None:
    url = f"{server}/slow"

    result = await http([url], timeout_s=0.3).execute({"url": url, "method": "POST"}, CTX)

    assert result == {"url": url, "ok": False, "error": "timed out after 0.3s"}


async def test_http_connection_refused_is_a_result() -> None:
    url = f"http://127.0.0.1:{closed_port()}/hook"

    result = await http([url]).execute({"url": url, "method": "POST"}, CTX)

    assert result["ok"] is False
    assert result["error"].startswith("ConnectError")


async def test_http_invalid_configured_url_is_a_result() -> None:
    url = "http://127.0.0.1:abc/"

    result = await http([url]).execute({"url": url, "method": "POST"}, CTX)

    assert result == {"url": url, "ok": False, "error": "InvalidURL: Invalid port: 'abc'"}


async def test_http_body_excerpt_is_bounded() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="é" * 1000))
    executor = HttpExecutor(
        "hook", HttpAction(type="http", urls=["http://x/"], body_excerpt_bytes=7), transport
    )

    result = await executor.execute({"url": "http://x/", "method": "POST"}, CTX)

    assert result["body"] == "ééé"


async def test_http_mock_transport_sees_exact_request() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    executor = HttpExecutor(
        "hook",
        HttpAction(type="http", urls=["http://x/a"], methods=["PUT"]),
        httpx.MockTransport(handler),
    )

    result = await executor.execute({"url": "http://x/a", "method": "PUT", "body": "b"}, CTX)

    assert result["ok"] is True
    assert result["body"] == ""
    assert [(r.method, str(r.url), r.content, r.headers["Idempotency-Key"]) for r in seen] == [
        ("PUT", "http://x/a", b"b", "7:3")
    ]


async def test_http_verify_is_unknown() -> None:
    assert await http(["http://x/"]).verify({"url": "http://x/"}, CTX) is None


def test_http_idempotent_flag_comes_from_config() -> None:
    assert http(["http://x/"], idempotent=True).idempotent is True


def test_is_dead_detects_a_live_process() -> None:
    # Guards the helper the group-kill tests rely on: it must not call a live process dead.
    assert is_dead(os.getpid()) is False


def test_command_child_dies_with_a_killed_daemon(tmp_path: Path) -> None:
    """A command's process must not outlive a SIGKILLed daemon and race the recovery's verify."""
    pid_file = tmp_path / "child.pid"
    script = (
        "import asyncio\n"
        "from agentd.outside.process import run_argv\n"
        f"argv = ['sh', '-c', 'echo $$ > {pid_file}; exec sleep 30']\n"
        "asyncio.run(run_argv(argv, env={'PATH': '/usr/bin:/bin'}, cwd=None, timeout_s=60,"
        " output_bytes=100))\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.02)
        child = int(pid_file.read_text())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child):
            assert time.monotonic() < deadline, "the command outlived its daemon"
            time.sleep(0.02)
    finally:
        parent.kill()
        parent.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (dead, not yet reaped by init) is not alive.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False
