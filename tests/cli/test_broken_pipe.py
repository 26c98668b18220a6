"""`agentd … --json | head`: when the reader of stdout goes away, agentd stops as other Unix tools
do — quietly (nothing on stderr, no traceback) and with the status of a process SIGPIPE ended
(141), not 1, which says the command itself failed. A real subprocess writing into a real pipe."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from agentd.db import queries as q
from tests.cli.test_paging import CONFIG, REPLIES


def test_a_reader_that_goes_away_ends_the_list_quietly(home: Any) -> None:
    home.write_config(CONFIG, REPLIES)

    def work(c: Any) -> None:  # ~400 KB of JSON: far more than a pipe holds
        for n in range(1200):
            q.add_goal(c, title=f"goal {n}", why="a long list", agent="default", criteria=[],
                       deadline=None)  # fmt: skip

    home.store.write(work)
    home.close()
    for args in (["goal", "list", "--json"], ["goal", "list", "--json", "--total"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd", "--home", str(home.root), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # as `head -1` does: one line, then gone
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        code = proc.wait(timeout=120)
        assert first.strip() in (b"[", b"{")
        assert err == b"", err.decode()
        assert code == 141, (args, code)
