"""Level-triggered watching, through the real daemon (in-process) and the real CLI (a process):
a trigger on a source's state that already holds starts a run — when the goal is added, when the
daemon starts — once per episode however many polls see it; and a check that cannot even be made
(`check_failed`) is no outage.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.errors import ConfigError
from agentd.models import Run
from tests.conftest import Home, ServeHttp, wait_for

pytestmark = pytest.mark.backends  # each test that opens a home: on SQLite and on PostgreSQL

_SCRIPT = Path(sys.executable).with_name("agentd")
AGENTD = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agentd"]

CONFIG = """
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.health]
type = "http"
url = "__URL__/health"
timeout_s = 2.0

[agents.watcher]
sources = ["health"]
actions = ["finish"]
triggers = ["health.unhealthy"]
watch = { interval_s = 0.05 }

[agents.watcher.checkin]
enabled = false
"""
# Every run decides once: it gives up at once, leaving the service down.
GIVE_UP = {
    "reason": "nothing I can do",
    "action": {"kind": "finish", "outcome": "failed", "summary": "left it down"},
}


class Service(BaseHTTPRequestHandler):
    """A service whose /health answers `Service.status` (the test flips it)."""

    status = 200
    release: threading.Event

    def do_GET(self) -> None:
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def service(http_server: ServeHttp) -> Any:
    handler = type("Svc", (Service,), {"status": 200})
    url = http_server(handler)
    return handler, url


def configure(home: Home, url: str, text: str = CONFIG) -> None:
    home.write_config(text.replace("__URL__", url), [GIVE_UP])
    home.store  # noqa: B018  # creates and migrates the database


async def cli(home: Home, *args: str) -> str:
    """The real `agentd` command line, in its own process (the daemon keeps running meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        *AGENTD, "--home", str(home.root), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, f"agentd {' '.join(args)}: {out.decode()}{err.decode()}"
    return out.decode()


async def add_goal(home: Home) -> int:
    out = await cli(home, "goal", "add", "Keep it up", "--why", "tests", "--agent", "watcher")
    return int(out.split()[-1])


def runs(home: Home, goal_id: int) -> list[Run]:
    return home.store.read(lambda c: q.list_runs(c, goal_id=goal_id))


def looks(home: Home, agent: str = "watcher") -> int:
    last = home.store.read(lambda c: worlds.last_snapshot(c, agent))
    return last[0] if last else 0


def state(home: Home, source: str, agent: str = "watcher") -> str | None:
    last = home.store.read(lambda c: worlds.last_snapshot(c, agent))
    if last is None or source not in last[1]:
        return None
    obs = last[1][source]
    return "check_failed" if obs.get("check_failed") else "healthy" if obs["ok"] else "unhealthy"


def seen(home: Home, source: str, want: str) -> Callable[[], bool]:
    return lambda: state(home, source) == want


async def polls(home: Home, count: int) -> None:
    """Let the poller look `count` more times."""
    start = looks(home)
    await wait_for(lambda: looks(home) >= start + count, 20)


def all_finished(home: Home, goal_id: int, n: int) -> Callable[[], bool]:
    return lambda: len(rs := runs(home, goal_id)) == n and all(r.status.finished for r in rs)


async def test_watch_service_down_when_the_goal_is_added_starts_one_run(
    home: Home, service: Any, serve: Any
) -> None:
    handler, url = service
    configure(home, url)
    handler.status = 503
    await serve()
    await wait_for(seen(home, "health", "unhealthy"))  # down before any goal exists

    goal_id = await add_goal(home)

    await wait_for(all_finished(home, goal_id, 1))
    (run,) = runs(home, goal_id)
    assert run.trigger == "state:health.unhealthy"
    start = home.steps(run.run_id)[0]
    assert start.data["data"]["source"] == "health" and start.data["data"]["status"] == 503


async def test_watch_stays_down_for_many_polls_one_run_per_episode(
    home: Home, service: Any, serve: Any
) -> None:
    handler, url = service
    configure(home, url)
    handler.status = 503
    await serve()
    goal_id = await add_goal(home)
    await wait_for(all_finished(home, goal_id, 1))

    await polls(home, 40)  # the run gave up; the service stays down
    assert len(runs(home, goal_id)) == 1

    handler.status = 200  # the episode ends…
    await wait_for(seen(home, "health", "healthy"))
    handler.status = 500  # …and a new one begins: one more run, and only one
    await wait_for(all_finished(home, goal_id, 2))
    await polls(home, 40)
    assert len(runs(home, goal_id)) == 2
    first, second = (home.steps(r.run_id)[0].data["episode"] for r in runs(home, goal_id))
    assert first != second


async def test_watch_service_down_at_daemon_start_starts_a_run_once(
    home: Home, service: Any, serve: Any
) -> None:
    handler, url = service
    configure(home, url)
    handler.status = 503
    first = await serve()  # sees the service down while no goal wants it watched
    await wait_for(seen(home, "health", "unhealthy"))
    await polls(home, 5)
    await first.shutdown()
    goal_id = await add_goal(home)  # while the daemon is stopped

    second = await serve()
    await wait_for(all_finished(home, goal_id, 1))
    await polls(home, 20)
    await second.shutdown()
    third = await serve()  # a restart in the same episode starts nothing new
    await polls(home, 20)
    await third.shutdown()

    assert [r.trigger for r in runs(home, goal_id)] == ["state:health.unhealthy"]


async def test_watch_goal_resumed_while_down_gets_a_run(
    home: Home, service: Any, serve: Any
) -> None:
    handler, url = service
    configure(home, url)
    goal_id = await add_goal(home)
    await cli(home, "goal", "pause", str(goal_id))
    handler.status = 503
    await serve()
    await wait_for(seen(home, "health", "unhealthy"))
    await polls(home, 10)
    assert runs(home, goal_id) == []  # paused: nothing to pursue

    await cli(home, "goal", "resume", str(goal_id))

    await wait_for(all_finished(home, goal_id, 1))


PROBE_CONFIG = """
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.probe]
type = "command"
argv = ["/nonexistent/agentd-health-probe"]

[agents.watcher]
sources = ["probe"]
actions = ["finish"]
triggers = ["probe.unhealthy"]
watch = { interval_s = 0.05 }

[agents.watcher.checkin]
enabled = false
"""


async def test_watch_a_check_that_cannot_run_is_check_failed_and_starts_nothing(
    home: Home, serve: Any
) -> None:
    configure(home, "", PROBE_CONFIG)
    goal_id = await add_goal(home)
    await serve()

    await wait_for(seen(home, "probe", "check_failed"))
    await polls(home, 20)

    assert runs(home, goal_id) == []
    names = {e.name for e in home.store.read(lambda c: qi.list_events(c, 100))}
    assert names == {"probe.check_failed"}


async def test_watch_unresolvable_host_is_check_failed_and_starts_nothing(
    home: Home, serve: Any
) -> None:
    configure(home, "http://agentd-test-host.invalid")
    goal_id = await add_goal(home)
    await serve()

    await wait_for(seen(home, "health", "check_failed"))
    await polls(home, 10)

    assert runs(home, goal_id) == []


# ── what the config refuses when it loads ────────────────────────────────────────────────────

HEAD = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[sources.health]
type = "http"
url = "http://127.0.0.1:8080/health"

[agents.watcher]
sources = ["health"]
actions = ["finish", "wait"]
watch = { interval_s = 5 }

[actions.wait]
type = "wait_event"
"""


def load_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    return str(e.value)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("not a url", "is not an http(s) URL"),
        ("ftp://127.0.0.1/health", "is not an http(s) URL"),
        ("http:///health", "is not an http(s) URL"),
        ("http://127.0.0.1:99999/health", "the port is not a number"),
        ("http://127.0.0.1:abc/health", "the port is not a number"),
        ("http://exa mple.com/", "no spaces"),
    ],
)
def test_config_source_url_that_cannot_be_requested_is_refused_with_its_line(
    tmp_path: Path, url: str, says: str
) -> None:
    error = load_error(tmp_path, HEAD.replace("http://127.0.0.1:8080/health", url))

    assert f"{tmp_path / 'config.toml'}: invalid config" in error
    assert "line 7, sources.health.url" in error and says in error


@pytest.mark.parametrize(
    ("trigger", "says"),
    [
        ("helth.unhealthy", "names unknown source 'helth'"),
        ("health.unhealty", "source 'health' emits only health.healthy, health.unhealthy"),
        ("probe.unhealthy", "is never emitted, as no agent watches source 'probe'"),
        (" alert", "is not an event name"),
    ],
)
def test_config_trigger_nothing_can_emit_is_refused_with_its_line(
    tmp_path: Path, trigger: str, says: str
) -> None:
    text = HEAD.replace(
        "watch = { interval_s = 5 }", f'watch = {{ interval_s = 5 }}\ntriggers = ["{trigger}"]'
    )
    text += '\n[sources.probe]\ntype = "command"\nargv = ["true"]\n'

    error = load_error(tmp_path, text)

    assert "line 13, agents.watcher.triggers" in error and says in error


def test_config_wait_event_names_are_checked_like_triggers(tmp_path: Path) -> None:
    error = load_error(tmp_path, HEAD + 'events = ["helth.healthy"]\n')

    assert "line 16, actions.wait.events" in error and "unknown source 'helth'" in error


def test_config_accepts_operator_events_and_watched_states(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        HEAD.replace(
            "watch = {",
            'triggers = ["alert", "health.unhealthy", "health.check_failed"]\nwatch = {',
        )
    )

    cfg = config.load(path)

    assert cfg.state_trigger("health.unhealthy") == ("health", "unhealthy")
    assert cfg.state_trigger("alert") is None and cfg.watchers("health") == ["watcher"]


def test_config_program_is_fixed_and_paths_are_relative_to_the_config(tmp_path: Path) -> None:
    assert "argv[0] is the program" in load_error(
        tmp_path,
        HEAD + '\n[actions.run]\ntype = "command"\nargv = ["{tool}"]\n'
        'params = { tool = { choices = ["rm"] } }\n',
    )
    path = tmp_path / "config.toml"
    path.write_text(HEAD + '\n[sources.log]\ntype = "file_tail"\npath = "logs/app.log"\n')

    assert config.load(path).sources["log"].path == tmp_path / "logs" / "app.log"  # type: ignore[union-attr]


def test_a_broken_check_in_the_middle_of_an_outage_is_the_same_episode() -> None:
    """unhealthy → check_failed (a DNS blip) → unhealthy is one stretch: same episode and since,
    so a goal whose run the operator stopped gets no new run (review finding: it restarted the
    service again)."""
    from agentd.sources import episode_key, with_history

    down = {"health": {"ok": False, "status": 500}}
    broken = {"health": {"ok": False, "check_failed": True, "error": "cannot resolve host"}}
    w1 = with_history(None, down, 1000.0)
    w2 = with_history(w1, down, 1001.0)
    w3 = with_history(w2, broken, 1002.0)
    w4 = with_history(w3, down, 1003.0)
    assert episode_key("a", "health", w4["health"]) == episode_key("a", "health", w1["health"])
    assert w4["health"]["streak"] == 3 and w4["health"]["since"].endswith("Z")
    up = with_history(w4, {"health": {"ok": True, "status": 200}}, 1004.0)
    assert up["health"]["episode"] == w4["health"]["episode"] + 1
