"""The evidence summary (agentd/views/evidence.py) from worlds the real sources made: a local HTTP
service that fails, a log file with errors, a command, the example MCP app; and `inbox show` of an
approval a real run raised against a failing HTTP service, at 80 columns, with the raw world only
behind --world."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentd.cli import app
from agentd.config import CommandSource, FileTailSource, HttpSource, McpSource
from agentd.db import items as qi
from agentd.models import JSON
from agentd.sources import with_history
from agentd.sources.command import CommandSourceReader
from agentd.sources.file_tail import FileTailReader
from agentd.sources.http import HttpSourceReader
from agentd.sources.mcp import McpSourceReader
from agentd.views import evidence as ev
from tests.conftest import Home, ServeHttp, closed_port, wait_for, waiting

NOW = datetime(2026, 12, 2, 12, 40, tzinfo=UTC)
T0 = NOW.timestamp() - 300  # the first look: five minutes before NOW


def flaky(codes: list[int]) -> type[BaseHTTPRequestHandler]:
    """A service answering each GET with the next code of `codes` (the last one for ever)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = codes.pop(0) if len(codes) > 1 else codes[0]
            body = json.dumps({"status": "ok" if code < 400 else "failing"}).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


async def looks(reader: Any, count: int) -> JSON:
    """`count` looks of one real source, each 60 s after the last, with their history."""
    world: JSON | None = None
    for n in range(count):
        world = with_history(world, {reader.name: await reader.observe()}, T0 + 60 * n)
    assert world is not None
    return world


def only(world: JSON) -> JSON:
    (source,) = ev.summary(world)["sources"]
    return dict(source)


async def test_evidence_http_failing_since_when_status_streak_last_healthy(
    http_server: ServeHttp,
) -> None:
    url = http_server(flaky([200, 503]))
    world = await looks(HttpSourceReader("checkout", HttpSource(type="http", url=url)), 4)
    source = only(world)
    assert source["kind"] == "http" and source["state"] == "unhealthy"
    assert source["facts"] == ["HTTP 503", "3 looks in a row", "healthy before then"]
    text = "\n".join(ev.lines(ev.summary(world), NOW, 80))
    assert "checkout  FAILING since Dec 2 12:36:00 UTC (4m ago) · HTTP 503" in text
    assert "healthy before then" in text and 'body: {"status": "failing"}' in text


async def test_evidence_http_down_from_the_first_look_is_never_seen_healthy() -> None:
    reader = HttpSourceReader(
        "api", HttpSource(type="http", url=f"http://127.0.0.1:{closed_port()}")
    )
    source = only(await looks(reader, 2))
    # A refused connection leaves no HTTP fields: the summary says what it knows.
    assert source["facts"] == ["2 looks in a row", "never seen healthy"]
    assert source["detail"][0]["error"] and "ConnectError" in source["detail"][0]["text"]


async def test_evidence_log_tail_marks_error_lines(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("boot\nINFO ready\nERROR db pool exhausted\nlevel=error msg=timeout\nINFO ok\n")
    cfg = FileTailSource(type="file_tail", path=log, lines=4)
    world = await looks(FileTailReader("app_log", cfg), 1)
    assert only(world)["facts"] == ["last 4 lines", "2 with errors"]
    shown = ev.lines(ev.summary(world), NOW, 80)
    assert shown[0] == "app_log  last 4 lines · 2 with errors"
    assert shown[1:] == [  # the error lines, then the newest: each newest first
        "         ! level=error msg=timeout",
        "         ! ERROR db pool exhausted",
        "           INFO ok",
        "           INFO ready",
    ]


async def test_evidence_log_that_cannot_be_read_is_a_broken_check(tmp_path: Path) -> None:
    cfg = FileTailSource(type="file_tail", path=tmp_path / "gone.log", lines=4)
    world = await looks(FileTailReader("app_log", cfg), 1)
    assert only(world)["state"] == "check_failed"
    shown = ev.lines(ev.summary(world), NOW, 80)
    assert shown[0].startswith("app_log  CHECK BROKEN since Dec 2 12:35:00 UTC")
    assert shown[1].startswith("         ! no such file: /")


async def test_evidence_command_shows_its_last_output() -> None:
    argv = ["sh", "-c", "echo one; echo two; echo 'version=v2 previous=v1'"]
    cfg = CommandSource(type="command", argv=argv)
    world = await looks(CommandSourceReader("deployed", cfg), 1)
    shown = ev.lines(ev.summary(world), NOW, 80)
    assert shown == ["deployed  ok · exit 0", "            one", "            two",
                     "            version=v2 previous=v1"]  # fmt: skip


async def test_evidence_failing_command_marks_its_output() -> None:
    cfg = CommandSource(type="command", argv=["sh", "-c", "echo disk full >&2; exit 3"])
    world = await looks(CommandSourceReader("disk", cfg), 2)
    shown = ev.lines(ev.summary(world), NOW, 80)
    assert shown[0].startswith("disk  FAILING since Dec 2 12:35:00 UTC") and "exit 3" in shown[0]
    assert shown[1] == "      never seen healthy"  # the headline wraps at ` · `, never cut
    assert shown[2] == "      ! stderr: disk full"


async def test_evidence_mcp_source_shows_its_title_fields(tmp_path: Path) -> None:
    data = tmp_path / "jobs.json"
    data.write_text(json.dumps({
        "roles": [{"role_id": "r1", "company": "Acme", "title": "Staff Engineer",
                   "location": "Berlin", "status": "saved", "saved_at": "2026-11-20"}],
        "applications": [],
    }))  # fmt: skip
    example = str(Path(__file__).resolve().parents[2] / "examples" / "jobsearch_mcp.py")
    cfg = McpSource.model_validate({
        "type": "mcp", "argv": [sys.executable, example, "--data", str(data)], "timeout_s": 30,
        "resources": ["jobsearch://roles"], "tools": {"list_roles": {"status": "saved"}},
    })  # fmt: skip
    world = await looks(McpSourceReader("jobs", cfg), 1)
    source = only(world)
    assert source["kind"] == "mcp" and source["facts"] == ["1 resource", "1 tool"]
    text = "\n".join(ev.lines(ev.summary(world), NOW, 100))
    assert "Staff Engineer" in text and "status=saved" in text, text


def test_evidence_brief_lines_carry_no_world_text() -> None:
    world = {
        "health": {"ok": False, "status": 500, "body": "SECRET-BODY", "since": "2026-12-02T12:35:00Z",
                   "streak": 3, "episode": 2},
        "log": {"ok": True, "lines": ["ERROR SECRET-LINE"]},
        "cmd": {"ok": True, "exit_code": 0, "output": "SECRET-OUT", "stderr": ""},
    }  # fmt: skip
    brief = "\n".join(ev.brief_lines(ev.summary(world)))
    assert "SECRET" not in brief
    assert "health: FAILING since Dec 2 12:35:00 UTC · HTTP 500 · 3 looks in a row" in brief
    assert "log: last 1 lines · 1 with errors" in brief and "cmd: ok · exit 0" in brief


# ── inbox show of an approval a real run raised ──────────────────────────────────────────────

LONG_ARG = "/srv/releases/checkout/" + "x" * 120  # resolves to an argv wider than 80 columns

RUN_CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.checkout]
type = "http"
url = "{url}/health"
timeout_s = 2

[sources.service_log]
type = "file_tail"
path = "{log}"
lines = 3

[actions.rollback]
type = "command"
argv = ["echo", "rolling back", "{{target}}"]
params = {{ target = {{ pattern = "^[a-z0-9/x]+$" }} }}

[agents.default]
actions = ["rollback", "finish"]
sources = ["checkout", "service_log"]
policy = {{ rules = {{ rollback = "approve" }} }}
checkin = {{ quiet = "none" }}
"""


async def test_inbox_show_of_a_real_http_approval_fits_80_columns_world_behind_a_flag(
    home: Home, serve: Any, http_server: ServeHttp, tmp_path: Path
) -> None:
    url = http_server(flaky([503]))
    log = tmp_path / "service.log"
    log.write_text(
        "INFO deployed v2\nERROR /health -> 503: payment backend timeout " + "z" * 90 + "\n"
    )
    reason = "the service answers 503 since the deploy; " * 4  # a model's long reason wraps
    proposal = {"reason": reason, "action": {"kind": "rollback", "target": "srv/v1" + "x" * 100}}
    home.write_config(RUN_CONFIG.format(url=url, log=log), replies=[proposal])
    run_id = home.start_run(home.add_goal(title="keep checkout up"))
    daemon = await serve()
    await wait_for(waiting(home, run_id))
    await daemon.shutdown()
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))

    runner = CliRunner()
    shown = runner.invoke(app, ["--home", str(home.root), "inbox", "show", str(item.item_id)],
                          env={"COLUMNS": "80"})  # fmt: skip
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "checkout     FAILING since" in out and "HTTP 503 · 1 look" in out
    assert "! ERROR /health -> 503" in out
    assert '"latency_ms"' not in out and "World at the time" not in out  # no raw world
    assert f"the raw world: agentd inbox show {item.item_id} --world" in out
    # The authoritative block loses nothing: its broken lines join back to the argument.
    assert ("srv/v1" + "x" * 100) in out.replace("↵\n", "").replace(" ", "")

    raw = runner.invoke(app, ["--home", str(home.root), "inbox", "show", str(item.item_id),
                              "--world"], env={"COLUMNS": "80"})  # fmt: skip
    assert raw.exit_code == 0 and '"latency_ms"' in raw.output and '"status": 503' in raw.output

    as_json = runner.invoke(app, ["--home", str(home.root), "inbox", "show", str(item.item_id),
                                  "--json"])  # fmt: skip
    data = json.loads(as_json.output)
    assert data["evidence"]["sources"][0]["facts"][0] == "HTTP 503"
    assert data["data"]["world"]["checkout"]["status"] == 503


def test_evidence_summary_is_json_able() -> None:
    world = {"h": {"ok": True, "status": 200, "since": "2026-12-02T12:00:00Z", "streak": 1}}
    assert json.loads(json.dumps(ev.summary(world))) == ev.summary(world)
