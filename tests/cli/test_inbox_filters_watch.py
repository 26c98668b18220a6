"""`agentd inbox list --kind/--goal/--status` narrows the list as the web inbox's filters do,
and `status --watch` / `inbox list --watch` show the home again every two seconds until Ctrl-C
(a real process, a real SIGINT)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.cli.test_cli import agentd, assert_clean_error
from tests.conftest import Home
from tests.daemon.test_daemon import AGENTD


def arranged(home: Home) -> dict[str, int]:
    home.root.mkdir(parents=True)
    (home.root / "config.toml").write_text("")
    one, two = home.add_goal(title="one"), home.add_goal(title="two")

    def post(c: object) -> dict[str, int]:
        ids = {
            "approval": qi.post(c, InboxKind.APPROVAL, title="approve restart?", goal_id=one),
            "question": qi.post(c, InboxKind.QUESTION, title="which region?", goal_id=two),
            "nudge": qi.post(c, InboxKind.NOTICE, title="try caching?", rule="nudge", goal_id=two),
            "notice": qi.post(c, InboxKind.NOTICE, title="weekly report", goal_id=one),
            "answered": qi.post(c, InboxKind.QUESTION, title="old question", goal_id=one),
        }
        qi.resolve(c, ids["answered"], InboxStatus.ANSWERED, answer="eu")
        return ids

    return home.store.write(post)


def listed(home: Home, *args: str) -> list[int]:
    result = agentd(home.root, "inbox", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return [i["item_id"] for i in json.loads(result.stdout)]


def test_inbox_list_filters_by_kind_goal_and_status(home: Home) -> None:
    ids = arranged(home)
    assert listed(home, "--kind", "approval") == [ids["approval"]]
    assert listed(home, "--kind", "notice") == [ids["nudge"], ids["notice"]]  # nudges are notices
    assert listed(home, "--kind", "nudge") == [ids["nudge"]]
    assert listed(home, "--goal", "1", "--kind", "question") == []
    assert listed(home, "--goal", "1", "--status", "all", "--kind", "question") == [ids["answered"]]
    assert listed(home, "--status", "answered") == [ids["answered"]]


def test_inbox_list_refuses_an_unknown_kind_with_the_choices(home: Home) -> None:
    arranged(home)
    result = agentd(home.root, "inbox", "list", "--kind", "approvals")
    assert_clean_error(result, 2, "--kind 'approvals': choose one of approval, question")


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("command", "marker"), [(["status"], "daemon: down"), (["inbox", "list"], "approve restart?")]
)
def test_watch_shows_frames_until_ctrl_c(
    home: Home, tmp_path: Path, command: list[str], marker: str
) -> None:
    arranged(home)
    out = tmp_path / "frames.txt"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*AGENTD, "--home", str(home.root), *command, "--watch"], stdout=sink, stderr=sink
        )
    try:
        while out.read_text().count(marker) < 2:  # a second frame, drawn by itself
            assert proc.poll() is None, out.read_text()
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 0 and "Traceback" not in out.read_text()
