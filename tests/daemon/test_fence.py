"""Fencing after a crash: what a killed daemon's commands left running is found and killed.

Real processes throughout: a stand-in daemon runs a command through `run_argv`, journals the spawn
record to a file, and is SIGKILLed; `fence` must then find the command's descendants.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.actions import ActionContext
from agentd.actions.command import CommandExecutor
from agentd.actions.http import HttpExecutor
from agentd.config import CommandAction, HttpAction
from agentd.models import JSON
from agentd.outside.process import fence, run_argv

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]
# Unique per test session: fencing by key scans the whole host, where other test runs may be going.
DB_ID = f"fence-{uuid.uuid4().hex[:12]}"
KEY = f"{DB_ID}:7:3"
SLEEP = [PY, "-c", "import time; time.sleep(30)"]
Sleeper = Callable[..., subprocess.Popen[bytes]]

# The daemon stand-in: runs argv with KEY in its environment and journals the spawn record.
DAEMON = """
import asyncio, json, os, sys
from agentd.outside.process import run_argv

async def journal(spawned):
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(spawned, f)
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])

env = {"PATH": os.environ["PATH"], "AGENTD_IDEMPOTENCY_KEY": sys.argv[2]}
asyncio.run(run_argv(sys.argv[3:], env=env, cwd=None, timeout_s=60, output_bytes=100,
                     on_spawn=journal))
"""

# What the command starts, as curl in a script would be: records its pid, then works for a while.
DESCENDANT = """
import os, sys, time
if sys.argv[2] == "setsid":
    os.setsid()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(30)
"""


def stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat from field 3 (state) on; [] when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def is_dead(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (PID 1 in a container may never reap it)."""
    fields = stat(pid)
    return not fields or fields[0] in ("Z", "X")


async def wait_dead(pid: int, bound_s: float = 5.0) -> bool:
    deadline = time.monotonic() + bound_s
    while not is_dead(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def wait_for(path: Path, bound_s: float = 10.0) -> str:
    deadline = time.monotonic() + bound_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)
    return path.read_text()


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a failed test might leave alive; killed at teardown."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not is_dead(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def sleeper() -> Iterator[Sleeper]:
    """Starts a sleeping child of the test (Popen keywords passed on); killed and reaped at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(**kw: Any) -> subprocess.Popen[bytes]:
        procs.append(subprocess.Popen(SLEEP, **kw))
        return procs[-1]

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def crash_mid_action(tmp_path: Path, escape: str = "stay") -> tuple[JSON, int]:
    """SIGKILL the daemon stand-in while its command's descendant works; the spawn record and
    that descendant's pid."""
    record, pid_file = tmp_path / "spawned.json", tmp_path / "descendant.pid"
    script = f'{PY} -c "$0" "$1" "$2" & sleep 30'
    command = ["sh", "-c", script, DESCENDANT, str(pid_file), escape]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    daemon = subprocess.Popen([PY, "-c", DAEMON, str(record), KEY, *command], env=env)
    try:
        descendant = int(wait_for(pid_file))
        spawned = json.loads(wait_for(record))
    finally:
        daemon.kill()
        daemon.wait()
    return spawned, descendant


# --- the issue: a descendant outlives the daemon, and fence kills it ------------------------------


async def test_fence_kills_a_descendant_left_in_the_recorded_group(
    tmp_path: Path, leftovers: list[int]
) -> None:
    spawned, descendant = crash_mid_action(tmp_path)
    leftovers.append(descendant)
    assert await wait_dead(spawned["pgid"]), "the command itself dies with the daemon"
    assert not is_dead(descendant), "what it started outlives the daemon (the issue)"

    # Another key: only the recorded group can find the descendant.
    report = await fence(spawned, f"{DB_ID}:7:4")

    assert descendant in report["killed"]
    assert report["survivors"] == []
    assert await wait_dead(descendant)


async def test_fence_kills_a_descendant_that_left_the_group_by_its_key(
    tmp_path: Path, leftovers: list[int]
) -> None:
    spawned, descendant = crash_mid_action(tmp_path, escape="setsid")
    leftovers.append(descendant)
    assert stat(descendant)[3] != str(spawned["pgid"]), "the descendant left the session"

    report = await fence(spawned, KEY)

    assert descendant in report["killed"]
    assert await wait_dead(descendant)


# --- the rule, process by process -----------------------------------------------------------------


async def test_fence_kills_the_recorded_session_leader(sleeper: Sleeper) -> None:
    proc = sleeper(start_new_session=True, env={})
    spawned = {"pgid": proc.pid, "start": int(stat(proc.pid)[19]), "boot_id": boot_id()}

    report = await fence(spawned, "")

    assert report["killed"] == [proc.pid]
    assert proc.wait(timeout=5) == -signal.SIGKILL


async def test_fence_spares_a_later_group_that_reused_the_number(sleeper: Sleeper) -> None:
    # As if our group died and its number went to an unrelated session started since.
    proc = sleeper(start_new_session=True, env={})
    spawned = {"pgid": proc.pid, "start": int(stat(proc.pid)[19]) - 100, "boot_id": boot_id()}

    report = await fence(spawned, KEY)

    assert report["killed"] == []
    assert proc.poll() is None


async def test_fence_ignores_a_record_from_another_boot(sleeper: Sleeper) -> None:
    proc = sleeper(start_new_session=True, env={})
    spawned = {"pgid": proc.pid, "start": int(stat(proc.pid)[19]), "boot_id": "another-boot"}

    report = await fence(spawned, KEY)

    assert report["killed"] == []
    assert proc.poll() is None


async def test_fence_without_a_record_kills_key_carriers(sleeper: Sleeper) -> None:
    proc = sleeper(env={"AGENTD_IDEMPOTENCY_KEY": KEY})

    report = await fence(None, KEY)

    assert report == {"killed": [proc.pid], "survivors": []}
    assert proc.wait(timeout=5) == -signal.SIGKILL


async def test_fence_matches_the_key_exactly(sleeper: Sleeper) -> None:
    proc = sleeper(env={"AGENTD_IDEMPOTENCY_KEY": KEY + "0"})

    report = await fence(None, KEY)

    assert report["killed"] == []
    assert proc.poll() is None


# --- recording the spawn --------------------------------------------------------------------------


async def test_run_argv_reports_the_child_group_start_and_boot() -> None:
    seen: list[JSON] = []

    async def journal(spawned: JSON) -> None:
        seen.append(spawned)

    # The child prints its pid and its own start time (field 22 of its stat; comm "sh" has no space),
    # then lives on a moment: a child already reaped when it is recorded gets the lower bound taken
    # before the fork instead (spawn_record), which a loaded machine would otherwise hit.
    argv = ["sh", "-c", "echo $$ $(cut -d' ' -f22 /proc/$$/stat); sleep 1"]
    done = await run_argv(
        argv,
        env={"PATH": "/usr/bin:/bin"},
        cwd=None,
        timeout_s=10,
        output_bytes=100,
        on_spawn=journal,
    )

    pid, start = map(int, done.stdout.split())
    host = socket.gethostname()
    assert seen == [{"pgid": pid, "start": start, "boot_id": boot_id(), "host": host}]


async def test_run_argv_kills_the_group_when_on_spawn_fails() -> None:
    seen: list[JSON] = []

    async def journal(spawned: JSON) -> None:
        seen.append(spawned)
        raise RuntimeError("journal is down")

    with pytest.raises(RuntimeError, match="journal is down"):
        await run_argv(SLEEP, env={}, cwd=None, timeout_s=10, output_bytes=100, on_spawn=journal)

    assert await wait_dead(seen[0]["pgid"])


def test_child_kills_itself_when_the_daemon_died_before_prctl() -> None:
    # Stands in for the race: the parent the child was forked by is not its parent any more.
    code = (
        "import os; from agentd.outside.process import _die_with_parent;"
        " _die_with_parent(os.getppid() + 1)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    assert subprocess.run([PY, "-c", code], env=env, check=False).returncode == -signal.SIGKILL


def test_child_lives_on_while_the_daemon_does() -> None:
    code = "import os; from agentd.outside.process import _die_with_parent; _die_with_parent(os.getppid())"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    assert subprocess.run([PY, "-c", code], env=env, check=False).returncode == 0


# --- executors ------------------------------------------------------------------------------------


def command_ctx(
    db_id: str = "", on_spawn: Callable[[JSON], Awaitable[None]] | None = None
) -> ActionContext:
    return ActionContext(7, 2, 3, "deploy", db_id=db_id, on_spawn=on_spawn)


async def test_command_execute_records_its_spawn_and_verify_does_not() -> None:
    seen: list[JSON] = []

    async def journal(spawned: JSON) -> None:
        seen.append(spawned)

    cfg = CommandAction(type="command", argv=["/bin/true"], verify_argv=["/bin/true"])
    executor, ctx = CommandExecutor("deploy", cfg), command_ctx(db_id=DB_ID, on_spawn=journal)

    await executor.execute({}, ctx)
    await executor.verify({}, ctx)

    assert [s["boot_id"] for s in seen] == [boot_id()]


async def test_command_fence_kills_by_the_home_key(sleeper: Sleeper) -> None:
    proc = sleeper(env={"AGENTD_IDEMPOTENCY_KEY": KEY})
    executor = CommandExecutor("deploy", CommandAction(type="command", argv=["/bin/true"]))

    report = await executor.fence(command_ctx(db_id=DB_ID), None)

    assert report["killed"] == [proc.pid]
    proc.wait(timeout=5)


async def test_command_fence_ignores_a_key_without_db_id(sleeper: Sleeper) -> None:
    # "7:3" is run 7, step 3 of every home on the host: it must not find another home's action.
    proc = sleeper(env={"AGENTD_IDEMPOTENCY_KEY": "7:3"})
    executor = CommandExecutor("deploy", CommandAction(type="command", argv=["/bin/true"]))

    report = await executor.fence(command_ctx(), None)

    assert report["killed"] == []
    assert proc.poll() is None


async def test_http_fence_has_nothing_to_kill() -> None:
    executor = HttpExecutor("hook", HttpAction(type="http", urls=["http://x/"]))

    assert await executor.fence(command_ctx(), {"pgid": 12345}) == {"killed": [], "survivors": []}
