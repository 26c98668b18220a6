"""Crash test for check-ins: a real process running `run_checkin` is SIGKILLed at each point of the
state machine — right after the precheck commits, while the model call is in flight, and right after
the reply is journaled (before its effect) — then a new process resumes the same check-in.

A journaled reply is never asked for again and its effect (a nudge, a run) is applied exactly once;
a call whose reply was not journaled may be asked again (nothing depended on it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.store import SyncStore
from tests.conftest import store_table

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[models.checker]
provider = "scripted"
replies = "checkins.json"
request_log = "checkins.log"

[agents.default]
actions = ["notify", "finish"]

[agents.default.checkin]
model = "checker"
"""

# The child: open the home like the daemon does, run one check-in; with a kill point, SIGKILL
# itself at that point (after the commit that reaches `status`, or inside the model call).
CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pathlib import Path
    from agentd import config
    from agentd.daemon import serve as daemon
    from agentd.db.store import Store
    from agentd.outer import checkin

    home, checkin_id, kill_at = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    class KillingStore:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def write(self, work):
            result = await self.inner.write(work)
            status = await self.inner.read(lambda c: c.execute(
                "SELECT status FROM checkins WHERE checkin_id = ?", (checkin_id,)).fetchone()[0])
            if status == kill_at:
                die()
            return result

    class KillingModel:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        async def complete(self, request):
            reply = await self.inner.complete(request)  # logged: the call was made
            if kill_at == "model":
                die()
            return reply

    async def main():
        cfg = config.load(home / "config.toml")
        store = Store(home / "agentd.db")
        await store.open()
        deps = daemon.build_deps(cfg, KillingStore(store), owner="child")
        deps.models["checker"] = KillingModel(deps.models["checker"])
        launched = []
        await checkin.run_checkin(deps, checkin_id, lambda r, e: launched.append(r))
        print("launched", launched)
        await store.close()

    asyncio.run(main())
    """
)


def run_child(
    home: Path, checkin_id: int, kill_at: str = "never"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(home), str(checkin_id), kill_at],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def arrange(home: Path, verdict: dict[str, Any], url: str | None) -> tuple[SyncStore, int]:
    home.mkdir()
    (home / "config.toml").write_text(CONFIG + store_table(url))
    (home / "replies.json").write_text(json.dumps([{"action": {"kind": "finish"}}]))
    reply = {"reason": "the world moved", "next_look_in_s": None, "verdict": verdict}
    (home / "checkins.json").write_text(json.dumps([reply]))
    store = SyncStore(home / "agentd.db")

    def work(c: Any) -> int:
        goal_id = q.add_goal(c, title="keep the blog fresh", why="readers come back for news",
                             agent="default", criteria=["a post a week"], deadline=None)  # fmt: skip
        worlds.add_snapshot(c, "default", None, {"blog": {"posts": 1}}, {"blog": {"posts": [0, 1]}})
        checkin_id = qc.add_due(c, goal_id, 1.0, 1.0)
        assert checkin_id is not None
        return checkin_id

    return store, store.write(work)


NUDGE = {"kind": "nudge", "topic": "publish the post", "message": "Publish the draft today."}
RUN = {"kind": "start_run", "request": "Draft the launch post."}


# A hang guard, not a speed limit: three child processes that each start agentd's daemon modules
# (~1.5 s of CPU); at load 14 on 2 cores a case took 50-60 s and pytest's 60 s default cut it.
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("kill_at", "calls"),
    [("deciding", 1), ("model", 2), ("decided", 1)],
    ids=["after-precheck", "during-model-call", "between-decision-and-effect"],
)
# On PostgreSQL the start_run verdict alone: its effect (a run, leased) is the one whose writes
# differ by engine, and each case costs three processes (~15 s of a worker there).
@pytest.mark.parametrize(
    ("verdict", "backend"),
    [(NUDGE, "sqlite"), (RUN, "sqlite"), (RUN, "postgres")],
    ids=["nudge-sqlite", "start_run-sqlite", "start_run-postgres"],
    indirect=["backend"],
)
def test_checkin_sigkill_repeats_neither_journaled_call_nor_effect(
    tmp_path: Path, kill_at: str, calls: int, verdict: dict[str, Any], store_url: str | None
) -> None:
    home = tmp_path / "home"
    store, checkin_id = arrange(home, verdict, store_url)
    try:
        killed = run_child(home, checkin_id, kill_at)
        assert killed.returncode == -9, killed.stderr[-2000:]
        crashed = store.read(lambda c: qc.get(c, checkin_id))
        assert crashed.status in qc.OPEN
        if kill_at == "decided":
            assert crashed.status == "decided" and crashed.raw  # journaled, effect not applied
            assert store.read(lambda c: qi.list_items(c, status=None)) == []

        resumed = run_child(home, checkin_id)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        again = run_child(home, checkin_id)  # a finished check-in is left alone
        assert again.returncode == 0 and "launched []" in again.stdout

        row = store.read(lambda c: qc.get(c, checkin_id))
        assert row.status == "done", row
        log = (home / "checkins.log").read_text().splitlines()
        assert len(log) == calls
        after = [
            json.loads(line) for line in log if json.loads(line)["t"] > row.precheck["decided_at"]
        ]
        assert after == []  # never asked again once journaled
        items = store.read(lambda c: qi.list_items(c, status=None))
        runs = store.read(lambda c: q.list_runs(c, goal_id=row.goal_id))
        if verdict is NUDGE:
            assert [i.rule for i in items] == ["nudge"] and runs == []
        else:
            assert items == [] and [r.trigger for r in runs] == [f"checkin:{checkin_id}"]
            assert "launched [" in resumed.stdout
    finally:
        store.close()
