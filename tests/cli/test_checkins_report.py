"""`agentd checkins report` (issue 32, item 4): nudge quality measured on a home's real goals —
per goal the share of nudges accepted, dismissed and ignored, the median reaction time and the
cadence's back-off they caused (text and --json); `status` calls out a goal whose nudges are
mostly dismissed. Nudges posted as check-ins post them, answered through the operator layer."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentd import config
from agentd.cli import app
from agentd.db import items as qi
from agentd.db.store import SyncStore
from agentd.models import InboxKind, InboxStatus
from agentd.operator import inbox

CONFIG = (
    '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
    '[agents.default]\nactions = ["finish"]\n'
)


def agentd(root: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--home", str(root), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _home(tmp_path: Path) -> tuple[Path, SyncStore]:
    root = tmp_path / "home"
    root.mkdir()
    (root / "config.toml").write_text(CONFIG)
    (root / "replies.json").write_text("[]")
    return root, SyncStore(config.Paths(root).db)


def _nudge(store: SyncStore, goal_id: int, topic: str, at: float) -> int:
    return store.write(lambda c: qi.post(
        c, InboxKind.NOTICE, title=f"nudge: {topic}", goal_id=goal_id, rule="nudge",
        data={"nudge": {"topic": topic, "message": topic}, "posted_at": at},
    ))  # fmt: skip


def test_checkins_report_gives_nudge_acceptance_per_goal(tmp_path: Path) -> None:
    root, store = _home(tmp_path)
    try:
        cfg = config.load(root / "config.toml")
        noisy = int(agentd(root, "goal", "add", "Tidy the wiki", "--why", "x").strip())
        quiet = int(agentd(root, "goal", "add", "Renew the domain", "--why", "y").strip())
        t0 = 1_800_000_000.0
        ids = [_nudge(store, noisy, f"topic {n}", t0) for n in range(4)]
        for n, item_id in enumerate(ids[:3]):  # dismissed after 60, 120, 180 s
            inbox.dismiss(store, item_id, "not now", now=t0 + 60 * (n + 1))
        inbox.accept(store, cfg, ids[3], now=t0 + 600)
        lapsed = _nudge(store, quiet, "renewal", t0)
        store.write(lambda c: qi.resolve(c, lapsed, InboxStatus.EXPIRED))
        _nudge(store, quiet, "still open", t0)

        report = {e["goal_id"]: e for e in json.loads(agentd(root, "checkins", "report", "--json"))}
        text = agentd(root, "checkins", "report")
        status = json.loads(agentd(root, "status", "--json"))
        status_text = agentd(root, "status")
    finally:
        store.close()

    wiki = report[noisy]
    assert (wiki["nudges"], wiki["accepted"], wiki["dismissed"], wiki["ignored"]) == (4, 1, 3, 0)
    assert wiki["accepted_share"] == 0.25 and wiki["dismissed_share"] == 0.75
    assert wiki["median_reaction_s"] == 150.0  # of 60, 120, 180 and 600 s
    assert wiki["backoff_steps"] == 3 and wiki["mostly_dismissed"] is True
    domain = report[quiet]
    assert (domain["ignored"], domain["open"], domain["ignored_share"]) == (1, 1, 1.0)
    assert domain["mostly_dismissed"] is False and domain["median_reaction_s"] is None
    row = next(line for line in text.splitlines() if line.startswith(str(noisy)))
    assert "25%" in row and "75%" in row and "backed off 3 steps" in row
    assert (
        f"goal {noisy}: 3 of 4 nudges dismissed; its check-ins already back off (3 steps)" in text
    )
    (flagged,) = status["dismissed_nudges"]
    assert flagged["goal_id"] == noisy and flagged["dismissed_share"] == 0.75
    assert "nudges mostly dismissed:" in status_text and f"goal {noisy}: 3 of 4" in status_text


def test_checkins_journal_still_answers_without_a_subcommand(tmp_path: Path) -> None:
    root, store = _home(tmp_path)
    store.close()
    assert json.loads(agentd(root, "checkins", "--json")) == []
    assert "no goal has been nudged yet" in agentd(root, "checkins", "report")
