"""docs/web-inbox.md's "Deciding from a bot", as written: each ```sh block's curl runs through
bash (after the page's block that sets SOCK and AUTH) with a HOME whose `~/.local/share/agentd` is
a real daemon's home and the venv's `agentd` on PATH, against an item of the kind it decides; its
answer holds every key and value of the ```json block shown after it. The page's item ids stand
for the test's own; a string the page ends with "…" only has to start the same."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind
from tests.configs import FINISH, act, scripted_home
from tests.conftest import Home, wait_for, waiting
from tests.test_readme import blocks, section

PAGE = Path(__file__).resolve().parents[2] / "docs" / "web-inbox.md"
VENV_BIN = Path(sys.executable).parent
BASH = shutil.which("bash") or "/bin/bash"
CONFIG = scripted_home(["notify", "ask", "finish"], rules='notify = "approve"')
REQUEST = re.compile(r"/api/inbox/(\d+)/(\w+)")
CUT = "--8<--"  # between the setup's output and the decision's


def examples() -> list[tuple[str, str]]:
    """(the curl command, the answer shown after it) for each decision of the section."""
    text = section(PAGE.read_text(), "## Deciding from a bot")
    fenced = re.findall(r"^```(sh|json)\n(.*?)^```", text, flags=re.M | re.S)
    pairs = itertools.pairwise(fenced)
    found = [
        (body, after) for (lang, body), (then, after) in pairs if (lang, then) == ("sh", "json")
    ]
    assert len(found) == len(blocks(text, "sh")), "a ```json answer after every request"
    return found


def setup_lines() -> str:
    """The page's block that sets SOCK and AUTH, the one just before the section."""
    (before,) = [b for b in blocks(PAGE.read_text().split("## Deciding from a bot")[0], "sh")]
    assert "SOCK=" in before and "AUTH=" in before, before
    return before


def holds(got: Any, shown: Any, where: str = "") -> list[str]:
    """Where `got` differs from what the page shows (`shown` is a part of `got`)."""
    if isinstance(shown, dict):
        if not isinstance(got, dict):
            return [f"{where}: {got!r}, not an object"]
        return [
            d
            for k, v in shown.items()
            for d in (holds(got[k], v, f"{where}.{k}") if k in got else [f"{where}.{k}: absent"])
        ]
    if isinstance(shown, str) and shown.endswith("…"):
        ok = isinstance(got, str) and got.startswith(shown[:-1])
    else:
        ok = got == shown
    return [] if ok else [f"{where}: {got!r}, the page shows {shown!r}"]


@pytest.fixture
def user(tmp_path: Path) -> Iterator[Path]:
    """A user's HOME short enough for `~/.local/share/agentd/api.sock` to fit AF_UNIX's 108
    bytes (pytest's tmp_path under an xdist worker does not)."""
    root = Path(tempfile.mkdtemp(prefix="agentd-doc-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def home(user: Path) -> Any:
    """The home at ~/.local/share/agentd of `user`, where the page's commands look."""
    h = Home(user / ".local" / "share" / "agentd")
    yield h
    h.close()


async def arrange(home: Home, serve: Any, verb: str) -> int:
    """A daemon on the home and an open item `verb` decides (a run waits on it, but for notices)."""
    if verb == "answer":
        replies = [act("ask", "need it", question="which region?"), FINISH]
    else:
        replies = [act("notify", "tell the team", message="deploy at 5"), FINISH]
    home.write_config(CONFIG, replies)
    goal_id = home.add_goal()
    if verb in ("dismiss", "accept"):
        await serve()
        message = "Tell the team about the 5 pm deploy."
        nudge = {
            "topic": "deploys",
            "message": message,
            "suggested": {"action": "notify", "args": {"message": "deploy at 5"}},
            "new": None,
        }
        return home.store.write(lambda c: qi.post(
            c, InboxKind.NOTICE, title=message, goal_id=goal_id,
            rule="nudge" if verb == "accept" else None, data={"nudge": nudge}))  # fmt: skip
    run_id = home.start_run(goal_id)
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return item.item_id


async def bash(script: str, user_home: Path) -> tuple[int, str, str]:
    drop = ("AGENTD_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"HOME": str(user_home), "PATH": f"{VENV_BIN}:{env.get('PATH', '')}"}
    # Not subprocess.run: the daemon answering curl runs on this very event loop.
    proc = await asyncio.create_subprocess_exec(
        BASH, "-c", script, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.parametrize(
    ("command", "shown"), examples(), ids=[REQUEST.findall(c)[0][1] for c, _ in examples()]
)
async def test_api_docs_decision_runs_as_written(
    home: Home, serve: Any, user: Path, command: str, shown: str
) -> None:
    ((page_id, verb),) = REQUEST.findall(command)
    item_id = await arrange(home, serve, verb)
    ours = re.compile(rf"\b{page_id}\b")
    script = f"{setup_lines()}\necho '{CUT}'\n{ours.sub(str(item_id), command)}"
    code, out, err = await bash(script, user)
    assert code == 0 and not err, err
    listed, _, decided = out.partition(f"{CUT}\n")
    assert item_id in [i["item_id"] for i in json.loads(listed)]  # the setup's GET /api/inbox
    differs = holds(json.loads(decided), json.loads(ours.sub(str(item_id), shown)))
    assert not differs, f"{command}\n{out}\n{differs}"


def test_api_docs_show_the_common_decisions() -> None:
    verbs = {REQUEST.findall(c)[0][1] for c, _ in examples()}
    assert verbs >= {"approve", "deny", "answer", "dismiss", "accept"}, verbs
