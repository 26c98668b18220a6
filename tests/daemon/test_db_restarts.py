"""Two real daemons survive 10 consecutive restarts of their PostgreSQL server under load (issue 31):
before each restart two more runs are started and the test waits until a step was committed since
the last restart (runs are executing), then the server is stopped (`pg_ctl stop -m fast`) for a
second and started again. Then: both daemons are the processes started at the beginning, every run
succeeded with one FINISH, no non-idempotent append happened twice, every journal is contiguous.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentd.db import queries as q
from agentd.models import RunStatus, StepKind
from tests.daemon.test_db_outage import gone, start_runs
from tests.daemon.test_multi_daemon import Daemon, wait_for
from tests.daemon.test_multi_daemon_chaos import WORDS, fresh_store, write_home
from tests.pg_cluster import Cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
RESTARTS = 10


def steps_committed(url: str, tmp_path: Path) -> int:
    store = fresh_store(url, tmp_path)
    try:
        return int(store.read(lambda c: c.execute("SELECT count(*) FROM steps").fetchone()[0]))
    finally:
        store.close()


def test_two_daemons_survive_ten_server_restarts_under_load(
    tmp_path: Path, pg_url: str, pg_cluster: Cluster
) -> None:
    effects = tmp_path / "effects.txt"
    daemons = []
    for name in ("a", "b"):
        write_home(tmp_path / name, pg_url, effects)
        daemons.append(Daemon(tmp_path / name))
    run_ids: list[int] = []
    try:
        for d in daemons:
            d.start()
        for _ in range(RESTARTS):
            store = fresh_store(pg_url, tmp_path)
            run_ids += start_runs(store, 2)
            store.close()
            before = steps_committed(pg_url, tmp_path)
            wait_for(lambda b=before: steps_committed(pg_url, tmp_path) > b, "a step", *daemons)
            pg_cluster.stop_server()
            time.sleep(1.0)  # the outage itself
            pg_cluster.start_server()
            assert not any(gone(d) for d in daemons), [gone(d) for d in daemons]

        def all_finished() -> bool:
            store = fresh_store(pg_url, tmp_path)
            try:
                return all(store.read(lambda c, r=r: q.get_run(c, r)).status.finished
                           for r in run_ids)  # fmt: skip
            finally:
                store.close()

        wait_for(all_finished, "every run to finish", *daemons, timeout_s=180)
        assert not any(gone(d) for d in daemons), [gone(d) for d in daemons]
        assert all(d.starts == 1 for d in daemons)
    finally:
        for d in daemons:
            d.stop()
    store = fresh_store(pg_url, tmp_path)
    try:

        def look(c: Any) -> list[tuple[RunStatus, list[Any]]]:
            return [(q.get_run(c, r).status, q.list_steps(c, r)) for r in run_ids]

        runs = store.read(look)
    finally:
        store.close()
    assert Counter(status for status, _ in runs) == {RunStatus.SUCCEEDED: len(run_ids)}
    for _, steps in runs:
        assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
        assert [s.kind for s in steps].count(StepKind.FINISH) == 1
    lines = [ln.split() for ln in effects.read_text().splitlines()]
    per_run_word = Counter((key.split(":")[-2], word) for key, word in lines)
    assert all(n == 1 for n in per_run_word.values()), per_run_word.most_common(3)
    assert len(per_run_word) == len(run_ids) * len(WORDS)
    print(f"{RESTARTS} restarts: {len(run_ids)} runs, {sum(len(s) for _, s in runs)} steps")
