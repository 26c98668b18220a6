"""docs/notifications.md says what an approval's message carries, as agentd/notify/content.py
sends it: agentd's brief evidence summary (its own words and numbers), never the world's text.
The message itself is checked against a real run in test_notify_content.py."""

from __future__ import annotations

from pathlib import Path

from agentd.models import JSON
from agentd.views import evidence as ev

DOC = Path(__file__).parents[2] / "docs" / "notifications.md"


def leaves_the_machine() -> str:
    text = DOC.read_text()
    start = text.index("**What leaves the machine.**")
    return " ".join(text[start : text.index("\n- **", start)].split())


def test_docs_say_an_approval_carries_agentds_summary_of_the_world() -> None:
    said = leaves_the_machine()
    assert "the world at the time" not in said  # what the message does carry, it carries
    assert "agentd's own summary of the world" in said
    assert "never its arguments, the model's reason, nor any text the world wrote" in said


def test_the_summary_an_approval_carries_holds_no_text_from_the_world() -> None:
    world: JSON = {
        "checkout": {
            "ok": False,
            "status": 503,
            "body": "BODY-TEXT",
            "since": "2026-12-07T03:12:00Z",
        },
        "service_log": {"ok": True, "lines": ["ERROR LOG-TEXT"]},
    }
    brief = "\n".join(ev.brief_lines(ev.summary(world)))
    assert "FAILING since" in brief and "HTTP 503" in brief and "1 with errors" in brief
    assert "BODY-TEXT" not in brief and "LOG-TEXT" not in brief
