"""The http, command and file_tail sources: an outside failure is an observation, never a raise."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.config import CommandSource, FileTailSource, HttpSource
from agentd.sources import episode_key, state_changes, state_of, transitions, with_history
from agentd.sources.command import CommandSourceReader
from agentd.sources.file_tail import FileTailReader, tail_lines
from agentd.sources.http import HttpSourceReader
from tests.conftest import ServeHttp, closed_port

PY = sys.executable


# --- http -----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event

    def do_GET(self) -> None:
        if self.path == "/slow":
            self.release.wait(30)
        code = 503 if self.path == "/down" else 200
        payload = f"{self.command} {self.path}".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(http_server: ServeHttp) -> str:
    return http_server(_Handler)


def http_source(url: str, **kw: Any) -> HttpSourceReader:
    return HttpSourceReader("site", HttpSource(type="http", url=url, **kw))


async def test_http_source_reports_status_latency_and_body(server: str) -> None:
    seen = await http_source(f"{server}/health").observe()

    assert seen["status"] == 200
    assert seen["ok"] is True
    assert seen["latency_ms"] >= 0
    assert seen["body"] == "GET /health"


async def test_http_source_error_status_is_not_ok(server: str) -> None:
    seen = await http_source(f"{server}/down").observe()

    assert seen["status"] == 503
    assert seen["ok"] is False


async def test_http_source_head_has_empty_body(server: str) -> None:
    seen = await http_source(f"{server}/health", method="HEAD").observe()

    assert seen["status"] == 200
    assert seen["body"] == ""


async def test_http_source_body_excerpt_is_bounded(server: str) -> None:
    seen = await http_source(f"{server}/health", body_excerpt_bytes=3).observe()

    assert seen["body"] == "GET"


async def test_http_source_connection_refused_is_an_observation() -> None:
    seen = await http_source(f"http://127.0.0.1:{closed_port()}/").observe()

    assert seen["ok"] is False
    assert seen["error"].startswith("ConnectError")
    assert "status" not in seen
    assert "check_failed" not in seen  # a valid URL nobody answers: the service is down


async def test_http_source_unresolvable_host_is_a_failed_check() -> None:
    seen = await http_source("http://agentd-no-such-host.invalid/health").observe()

    assert seen["ok"] is False and seen["check_failed"] is True
    assert "cannot resolve host 'agentd-no-such-host.invalid'" in seen["error"]


async def test_http_source_timeout_is_an_observation(server: str) -> None:
    seen = await http_source(f"{server}/slow", timeout_s=0.3).observe()

    assert seen == {"ok": False, "error": "timed out after 0.3s"}


async def test_http_source_invalid_url_is_a_failed_check() -> None:
    # The config refuses such a URL; a reader built around it still never raises.
    cfg = HttpSource.model_construct(
        type="http", url="http://127.0.0.1:abc/", method="GET", timeout_s=5.0,
        body_excerpt_bytes=500,
    )  # fmt: skip

    seen = await HttpSourceReader("site", cfg).observe()

    assert seen == {"ok": False, "check_failed": True, "error": "InvalidURL: Invalid port: 'abc'"}


async def test_http_source_uses_the_given_transport() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(302, text=request.method))
    reader = HttpSourceReader("site", HttpSource(type="http", url="http://x/"), transport)

    seen = await reader.observe()

    assert (seen["status"], seen["ok"], seen["body"]) == (302, True, "GET")


async def test_http_source_transport_error_is_an_observation() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("reset by peer", request=request)

    reader = HttpSourceReader(
        "site", HttpSource(type="http", url="http://x/"), httpx.MockTransport(refuse)
    )

    assert await reader.observe() == {"ok": False, "error": "ReadError: reset by peer"}


# --- command --------------------------------------------------------------------------------------


def command_source(argv: list[str], **kw: Any) -> CommandSourceReader:
    return CommandSourceReader("probe", CommandSource(type="command", argv=argv, **kw))


async def test_command_source_reports_exit_code_and_output() -> None:
    seen = await command_source(["/bin/echo", "up"]).observe()

    assert seen == {"exit_code": 0, "ok": True, "output": "up\n", "stderr": ""}


async def test_command_source_nonzero_exit_is_not_ok() -> None:
    code = "import sys; print('degraded'); sys.stderr.write('disk'); sys.exit(2)"

    seen = await command_source([PY, "-c", code]).observe()

    assert seen == {"exit_code": 2, "ok": False, "output": "degraded\n", "stderr": "disk"}


async def test_command_source_output_keeps_the_tail() -> None:
    seen = await command_source([PY, "-c", "print('x' * 100 + 'last')"], output_bytes=5).observe()

    assert seen["output"] == "last\n"


async def test_command_source_missing_executable_is_an_observation() -> None:
    seen = await command_source(["/nonexistent/agentd-probe"]).observe()

    assert seen["ok"] is False and seen["check_failed"] is True
    assert "agentd-probe" in seen["error"]


async def test_command_source_shell_that_cannot_find_its_program_is_a_failed_check() -> None:
    seen = await command_source(["sh", "-c", "agentd-no-such-curl -f http://x/"]).observe()

    assert seen["ok"] is False and seen["check_failed"] is True
    assert seen["error"].startswith("exit 127")


async def test_command_source_failing_probe_is_unhealthy_not_a_failed_check() -> None:
    seen = await command_source(["sh", "-c", "exit 2"]).observe()

    assert seen["ok"] is False and "check_failed" not in seen


async def test_command_source_timeout_is_an_observation() -> None:
    seen = await command_source([PY, "-c", "import time; time.sleep(60)"], timeout_s=0.3).observe()

    assert seen == {"ok": False, "error": "timed out after 0.3s"}


async def test_command_source_env_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_TEST_SECRET", "hunter2")
    code = "import os; print(os.environ.get('AGENTD_TEST_SECRET'), os.environ.get('BASE'))"
    reader = CommandSourceReader(
        "probe", CommandSource(type="command", argv=[PY, "-c", code]), base_env={"BASE": "b"}
    )

    seen = await reader.observe()

    assert seen["output"] == "None b\n"


# --- file_tail ------------------------------------------------------------------------------------


def file_tail(path: Path, lines: int = 20) -> FileTailReader:
    return FileTailReader("log", FileTailSource(type="file_tail", path=path, lines=lines))


async def test_file_tail_big_file_returns_exactly_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i}\n" for i in range(300_000)))  # ~3.5 MB, many blocks

    seen = await file_tail(log, lines=50).observe()

    assert seen["ok"] is True
    assert seen["lines"] == [f"line {i}" for i in range(299_950, 300_000)]
    assert seen["size_bytes"] == log.stat().st_size


async def test_file_tail_lines_spanning_block_boundaries(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    rows = [f"{i}:" + "x" * 40_000 for i in range(10)]  # each row crosses a 64 KiB block edge
    log.write_text("\n".join(rows) + "\n")

    seen = await file_tail(log, lines=3).observe()

    assert seen["lines"] == rows[-3:]


def test_file_tail_last_line_longer_than_a_block_is_whole(tmp_path: Path) -> None:
    # The first block holds only the final newline: the scan must go on to the one before.
    log = tmp_path / "wide.log"
    log.write_text("a" * 100_000 + "\n" + "b" * 70_000 + "\n")

    lines, _ = tail_lines(log, 1)

    assert lines == ["b" * 70_000]


def test_file_tail_scan_stops_at_its_bound_without_a_partial_line(tmp_path: Path) -> None:
    # A line bigger than the scan bound: what is found after it is returned, not its fragment.
    log = tmp_path / "blob.log"
    log.write_text("a" * (3 * 1024 * 1024) + "\nshort\n")

    lines, _ = tail_lines(log, 5)

    assert lines == ["short"]


async def test_file_tail_without_final_newline(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("a\nb\nc")

    seen = await file_tail(log, lines=2).observe()

    assert seen["lines"] == ["b", "c"]


async def test_file_tail_short_file_returns_every_line(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("a\r\n\nb\n")

    seen = await file_tail(log, lines=20).observe()

    assert seen["lines"] == ["a", "", "b"]


async def test_file_tail_empty_file(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(b"")

    seen = await file_tail(log).observe()

    assert seen == {"ok": True, "lines": [], "size_bytes": 0}


async def test_file_tail_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    log = tmp_path / "bin.log"
    log.write_bytes(b"ok\n\xff\xfe\n")

    seen = await file_tail(log).observe()

    assert seen["lines"] == ["ok", "\ufffd\ufffd"]


async def test_file_tail_missing_file_is_an_observation(tmp_path: Path) -> None:
    log = tmp_path / "gone.log"

    seen = await file_tail(log).observe()

    assert seen == {"ok": False, "check_failed": True, "error": f"no such file: {log}"}


async def test_file_tail_directory_is_an_observation(tmp_path: Path) -> None:
    seen = await file_tail(tmp_path).observe()

    assert seen["ok"] is False
    assert str(tmp_path) in seen["error"]


def test_file_tail_reads_only_the_end_of_a_huge_sparse_file(tmp_path: Path) -> None:
    # 8 GiB of holes then two lines: reading the whole file would take minutes, or all memory.
    log = tmp_path / "huge.log"
    with log.open("wb") as f:
        f.truncate(8 * 1024**3)
        f.seek(0, 2)
        f.write(b"\nfirst\nsecond\n")

    lines, size_bytes = tail_lines(log, 2)

    assert lines == ["first", "second"]
    assert size_bytes == 8 * 1024**3 + 14


# --- states and episodes --------------------------------------------------------------------------


def _look(**obs: Any) -> dict[str, Any]:
    return {"health": obs}


UP, DOWN = _look(ok=True, status=200), _look(ok=False, status=503)
BROKEN = _look(ok=False, check_failed=True, error="cannot resolve host 'x'")


def _chain(*looks: dict[str, Any]) -> list[dict[str, Any]]:
    worlds: list[dict[str, Any]] = []
    for n, look in enumerate(looks):
        worlds.append(with_history(worlds[-1] if worlds else None, look, 1_800_000_000.0 + n))
    return worlds


def test_state_of_tells_a_broken_check_from_an_outage() -> None:
    assert [state_of(w["health"]) for w in _chain(UP, DOWN, BROKEN)] == [
        "healthy", "unhealthy", "check_failed",
    ]  # fmt: skip
    assert state_of({"lines": []}) is None


def test_with_history_a_broken_check_has_no_health_and_keeps_the_last_one() -> None:
    broken = _chain(DOWN, BROKEN)[-1]["health"]

    assert "healthy" not in broken  # nothing a decider could read as "down"
    assert broken["last_healthy"] is False and broken["streak"] == 1


def test_transitions_a_broken_check_neither_flips_nor_hides_a_flip() -> None:
    w = _chain(UP, BROKEN, UP, BROKEN, DOWN)

    assert transitions(w[0], w[1]) == []  # check_failed is no health flip
    assert transitions(w[1], w[2]) == []  # healthy before it broke: still healthy
    assert transitions(w[3], w[4]) == [("health", False)]  # healthy before, down now


def test_state_changes_name_every_state_once() -> None:
    w = _chain(UP, UP, BROKEN, BROKEN, DOWN)

    moves = [state_changes(a, b) for a, b in zip([None, *w], w, strict=False)]

    assert moves == [[], [], [("health", "check_failed")], [], [("health", "unhealthy")]]


def test_episode_key_holds_through_a_stretch_and_moves_with_each_new_one() -> None:
    w = _chain(DOWN, DOWN, DOWN, UP, DOWN)
    keys = [episode_key("a", "health", x["health"]) for x in w]

    assert keys[0] == keys[1] == keys[2]
    assert len({keys[0], keys[3], keys[4]}) == 3
