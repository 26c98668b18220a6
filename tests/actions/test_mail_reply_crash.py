"""A SIGKILL while a reply is being sent: it is sent at most once. The reply's Message-ID is its
idempotency key; the restarted daemon looks for it in Sent and, not finding it (the crash came
before the copy was saved), asks the operator instead of sending again. Real `agentd serve`
processes, a real Dovecot, a real SMTP server that holds its answer until the daemon is killed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.db import queries as q
from agentd.db.store import SyncStore
from agentd.models import RunStatus, StepKind
from tests.configs import FINISH, act, scripted_home
from tests.dovecot import imap_source
from tests.dovecot_server import Dovecot, message
from tests.mail_support import folder, mail_actions, relay_table, smtp_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _wait(predicate: Any, what: str, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in time: {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def daemons(home: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def serve(home: Path, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    log = home / f"daemon-{len(procs) + 1}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd", "--home", str(home), "serve"],
            stdout=out, stderr=out, start_new_session=True,
            env={**os.environ, "AGENTD_LOG_FORMAT": "json"},
        )  # fmt: skip
    procs.append(proc)
    _wait(lambda: '"daemon.ready"' in log.read_text() or proc.poll() is not None, "ready")
    assert proc.poll() is None, log.read_text()[-3000:]
    return proc


async def test_reply_killed_mid_send_is_sent_at_most_once(tmp_path: Path, dovecot: Dovecot) -> None:
    home = tmp_path / "home"
    home.mkdir()
    replies = [
        act("reply", message_id="<q@example.com>", to=["bob@example.com"],
            subject="Re: question", body="Yes, Tuesday.", send=True),
        FINISH,
    ]  # fmt: skip
    (home / "replies.json").write_text(json.dumps(replies))
    with smtp_server() as smtp, daemons(home) as procs:
        smtp.hold = True
        tables = imap_source(dovecot) + relay_table(smtp.port)
        tables += mail_actions(send=True, allow='["*@example.com"]', smtp="relay")
        text = scripted_home(
            ["reply", "ask", "finish"], tables=tables, rules="",
            agent_keys='triggers = ["inbox.received"]\nsources = ["inbox"]',
        )  # fmt: skip
        (home / "config.toml").write_text(text)
        store = SyncStore(config.Paths(home).db)
        try:
            first = serve(home, procs)
            cursor = "SELECT 1 FROM meta WHERE key = 'imap_cursor:inbox'"
            _wait(lambda: store.read(lambda c: c.execute(cursor).fetchone()) is not None, "cursor")
            store.write(lambda c: q.add_goal(c, title="answer bob", why="tests", agent="default",
                                             criteria=[], deadline=None))  # fmt: skip
            dovecot.deliver(
                message("question", sender="bob@example.com", message_id="<q@example.com>")
            )
            _wait(smtp.arrived.is_set, "the reply reaching the SMTP server")
            os.killpg(first.pid, signal.SIGKILL)  # before the server's answer reached it
            first.wait()
            smtp.release.set()
            serve(home, procs)
            (run,) = store.read(lambda c: q.list_runs(c))
            _wait(lambda: store.read(lambda c: q.get_run(c, run.run_id)).status == RunStatus.WAITING,
                  "the restarted daemon to ask")  # fmt: skip
            steps = store.read(lambda c: q.list_steps(c, run.run_id))
            (acted,) = [s for s in steps if s.kind == StepKind.ACT]
            assert acted.result is not None and acted.result.get("outcome") == "unknown"
            wait = store.read(lambda c: q.get_run(c, run.run_id)).wait
            assert wait is not None and wait["why"] == "unknown_outcome"  # the operator decides
        finally:
            store.close()
        assert len(smtp.got) == 1  # sent once, never again after the restart
    assert await folder(dovecot, "Sent") == []  # the crash came before the copy
