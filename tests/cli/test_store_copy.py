"""`agentd store copy --to URL` as the operator runs it (real processes, a real PostgreSQL): the
demo's home copied into PostgreSQL reads the same through a second home whose config names the
database (`goal list`, `inbox list --all`, `runs show`); a line per table and the next steps; the
refusals — a daemon serving the home, a target that holds rows, a home already on PostgreSQL —
each leaving the target as it was."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentd.config import Paths
from agentd.db import copy as db_copy
from agentd.db import meta
from agentd.db.postgres.connection import connect
from agentd.db.store import SyncStore
from tests.db.test_store_copy import fill_home
from tests.demo.test_service_watch import AGENTD

# A guard against a hang, proportional to the work: the module's set-up runs the demo (`filled`:
# 9 s at load 6, 39 s in a full-suite run at load 14-50), which lands in whichever test comes
# first, and the demo copy runs 23 fresh CLI processes (8 s at load 6, 86 s there). Each process
# has its own 60 s bound, which says which command hung.
pytestmark = pytest.mark.timeout(360)
ENV = {**os.environ, "TZ": "UTC", "COLUMNS": "140"}
SAME_TEXT = [  # the done-when, and more of what an operator reads
    ("goal", "list"),
    ("inbox", "list", "--all"),
    ("runs", "list"),
    ("runs", "show", "2"),  # the build: its journal, artifact versions and verdicts
    ("artifact", "show", "2"),
    ("goal", "schedule", "1"),
]
# The same values (jsonb hands an object's keys back in its own order: see the xfail below).
SAME_JSON = [
    ("goal", "list", "--json"),
    ("inbox", "list", "--all", "--json"),
    ("runs", "show", "1", "--json"),  # the run through the approval wait, every step's fields
    ("runs", "show", "2", "--json"),
    ("checkins", "--json"),
]


def agentd(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTD, "--home", str(home), *args],
        capture_output=True, text=True, timeout=60, env=env or ENV,
    )  # fmt: skip


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = fill_home(tmp_path_factory.mktemp("filled") / "home")
    store = SyncStore(home / "agentd.db")
    try:  # the home's clock stands still: "3m ago" reads the same from both homes, however slow
        now = time.time()
        clock = json.dumps({"speed": 0.0, "wall0": now, "sim0": now})
        store.write(lambda c: meta.set_meta(c, "clock", clock))
    finally:
        store.close()
    return home


@pytest.fixture
def home(filled: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(filled, tmp_path / "home"))


def pg_home(home: Path, url: str) -> Path:
    """A second home whose config is the first's with `[store] url`: no agentd.db of its own."""
    other = home.parent / "on-postgres"
    other.mkdir()
    (other / "config.toml").write_text(
        (home / "config.toml").read_text() + f'\n[store]\nurl = "{url}"\n'
    )
    return other


def tables_in(url: str) -> set[str]:
    pg = connect(url)
    try:
        return db_copy.table_names(pg)
    finally:
        pg.close()


def test_the_demo_home_copied_into_postgresql_reads_the_same(home: Path, pg_url: str) -> None:
    done = agentd(home, "store", "copy", "--to", pg_url)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"copying {home / 'agentd.db'} into postgresql://agentd@/")
    copied = [line.split()[0] for line in lines[1:] if line.endswith("  ok")]
    assert {"goals", "runs", "steps", "inbox", "schedules", "outbox", "artifacts"} <= set(copied)
    assert "MISMATCH" not in out and "counts and checksums match on both sides" in out
    assert f'url = "{pg_url}"' in out and f"keep {home / 'agentd.db'} as a backup" in out
    assert "daemons (" in out  # said not copied, and why

    other = pg_home(home, pg_url)
    with ThreadPoolExecutor(2) as pool:  # the two homes' commands side by side: half the wall time
        pairs = [(args, pool.map(lambda h, a=args: agentd(h, *a), (home, other)))
                 for args in SAME_TEXT + SAME_JSON]  # fmt: skip
    for args, (want, got) in pairs:
        assert want.returncode == got.returncode == 0, (args, want.stderr, got.stderr)
        if "--json" in args:
            assert json.loads(got.stdout) == json.loads(want.stdout), args
        else:
            assert got.stdout == want.stdout, args


def test_runs_show_reads_the_same_text_on_postgresql(home: Path, pg_url: str) -> None:
    """The issue's three views read the same text (jsonb hands an object's keys back in its own
    order: the views put what they list from JSON in name order)."""
    assert agentd(home, "store", "copy", "--to", pg_url).returncode == 0
    other = pg_home(home, pg_url)
    for args in [("runs", "show", "1"), ("inbox", "list", "--all"), ("goal", "list")]:
        assert agentd(other, *args).stdout == agentd(home, *args).stdout, args


def test_json_for_scripts_and_the_url_from_the_environment(home: Path, pg_url: str) -> None:
    env = {**ENV, "AGENTD_TEST_TARGET": pg_url}
    done = agentd(home, "store", "copy", "--to-env", "AGENTD_TEST_TARGET", "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # nothing else on stdout
    assert all(t["ok"] and t["rows"] == t["target_rows"] for t in data["tables"])
    assert data["rows"] == sum(t["rows"] for t in data["tables"]) and data["schema"] > 0
    assert data["config"]["add"] == '[store]\nurl_env = "AGENTD_TEST_TARGET"'
    assert data["url_env"] == "AGENTD_TEST_TARGET" and data["sequences"]["goals.goal_id"] == 2
    assert data["backup"] == str(home / "agentd.db")

    # The next steps taken in this home: its commands now read PostgreSQL, even with the SQLite
    # file moved away (its has-run marker stays, and says nothing about a PostgreSQL home).
    with (home / "config.toml").open("a") as config:
        config.write("\n" + data["config"]["add"] + "\n")
    (home / "agentd.db").rename(home / "agentd.db.bak")
    listed = agentd(home, "goal", "list", env=env)
    assert listed.returncode == 0 and "Keep checkout healthy" in listed.stdout, listed.stderr


def test_a_second_copy_into_the_same_database_is_refused(home: Path, pg_url: str) -> None:
    assert agentd(home, "store", "copy", "--to", pg_url).returncode == 0
    again = agentd(home, "store", "copy", "--to", pg_url)
    assert again.returncode == 1 and again.stdout == ""
    assert "is not empty: it holds rows (" in again.stderr and "goals 1" in again.stderr
    assert "createdb" in again.stderr


def test_a_served_home_is_refused_and_nothing_is_written(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "served"
    assert agentd(home, "init").returncode == 0
    daemon = subprocess.Popen(
        [*AGENTD, "--home", str(home), "serve"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=ENV, start_new_session=True,
    )  # fmt: skip
    try:
        paths = Paths(home)
        deadline = time.monotonic() + 30
        while not (paths.lock.exists() and paths.lock.read_text().strip() == str(daemon.pid)):
            assert daemon.poll() is None, "the daemon exited"
            assert time.monotonic() < deadline, "the daemon did not take its home in time"
            time.sleep(0.02)
        done = agentd(home, "store", "copy", "--to", pg_url)
        assert done.returncode == 1
        assert f"a daemon (pid {daemon.pid}) is serving {home}; stop it first" in done.stderr
        assert tables_in(pg_url) == set()
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(30)
    done = agentd(home, "store", "copy", "--to", pg_url)  # stopped: now it copies
    assert done.returncode == 0, done.stderr
    assert "goals" in tables_in(pg_url)


def test_a_home_already_on_postgresql_and_a_bad_command_line_are_refused(
    tmp_path: Path, pg_url: str
) -> None:
    home = tmp_path / "pg"
    home.mkdir()
    (home / "config.toml").write_text(f'[store]\nurl = "{pg_url}"\n')
    done = agentd(home, "store", "copy", "--to", pg_url)
    assert done.returncode == 1 and "already keeps its state in PostgreSQL" in done.stderr
    assert tables_in(pg_url) == set()
    for args, says in [
        ((), "--to postgresql://user@host/db, or --to-env NAME"),
        (("--to", "sqlite:///x.db"), "--to must be a PostgreSQL URL"),
        (("--to-env", "AGENTD_NOT_SET_ANYWHERE"), "no such variable is set"),
    ]:
        bad = agentd(tmp_path, "store", "copy", *args)
        assert bad.returncode == 2 and says in bad.stderr, (args, bad.stderr)


def test_no_daemon_can_start_while_a_copy_holds_the_home(tmp_path: Path) -> None:
    from agentd.daemon.serve import home_lock
    from agentd.errors import DaemonRunning
    from agentd.operator.store_copy import no_daemon

    paths = Paths(tmp_path)
    with no_daemon(paths), pytest.raises(DaemonRunning), home_lock(paths):
        pass
    with home_lock(paths):  # the copy is done: the home is free again
        pass
