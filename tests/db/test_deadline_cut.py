"""The client deadline (db/outage.py Deadline) cuts only the statement it timed: a batch that
ended while the watcher was deciding to cut it must not have the cut land on the connection under
the next batch (whose COMMIT could then land and be reported failed)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import structlog

from agentd.db.outage import Deadline


def test_a_cut_lands_only_while_the_statement_it_timed_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deciding, left = threading.Event(), threading.Event()
    state = {"inside": False}
    cuts: list[bool] = []

    class SlowLog:
        """The watcher's line about the cut, said between its look and its cut: slow here
        (a loaded machine), so the timed block tries to end meanwhile."""

        def error(self, *args: Any, **kw: Any) -> None:
            deciding.set()
            left.wait(1.0)

    monkeypatch.setattr(structlog, "get_logger", lambda *a, **k: SlowLog())
    deadline = Deadline(0.01, lambda conn: cuts.append(state["inside"]), "test")

    def statement() -> None:
        with deadline.timing("conn"):
            state["inside"] = True
            deciding.wait(10)  # past its deadline: the watcher decided to cut it
        state["inside"] = False  # the statement ended; the next one may begin on "conn"
        left.set()

    thread = threading.Thread(target=statement)
    thread.start()
    thread.join(15)
    assert cuts == [True]  # cut while it ran, not after it ended
