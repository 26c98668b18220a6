"""The evidence section of an item's page (agentd/web/evidence_html.py) says what the CLI says:
the state word where the CLI prints one (agentd/views/evidence.py `state_word`), once; the run's
last actions under their own heading, apart from the sources; error lines marked and the mark
explained; a long quote folded after its first lines."""

from __future__ import annotations

import html as html_text
import re
from datetime import UTC, datetime

from agentd.models import JSON
from agentd.views import evidence as ev
from agentd.web import evidence_html

NOW = datetime(2026, 12, 2, 12, 40, tzinfo=UTC)
LOG = [f"INFO request {n} served" for n in range(5)] + [
    f"ERROR upstream timeout {n}" for n in range(5)
]
EVIDENCE: JSON = {
    "sources": [
        {"name": "checkout", "kind": "http", "state": "unhealthy", "since": "2026-12-02T12:36:00Z",
         "healthy_until": "2026-12-02T12:35:00Z", "facts": ["HTTP 503", "4 looks in a row"],
         "detail": []},
        {"name": "service_log", "kind": "log", "state": "healthy", "since": None,
         "healthy_until": None, "facts": ["last 10 lines", "5 with errors"],
         "detail": [{"text": t, "error": t.startswith("ERROR")} for t in LOG]},
        {"name": "version", "kind": "command", "state": "healthy", "since": None,
         "healthy_until": None, "facts": ["exit 0"], "detail": [{"text": "v2", "error": False}]},
    ],
    "actions": [
        {"seq": 3, "at": "2026-12-02T12:38:00Z", "action": "fetch_logs", "args": {},
         "status": "ok", "outcome": "ok · exit 0 · 11 ms"},
        {"seq": 5, "at": "2026-12-02T12:39:00Z", "action": "restart", "args": {},
         "status": "failed", "outcome": "failed · exit 1 · 40 ms"},
    ],
}  # fmt: skip


def text_of(html: str) -> str:
    return html_text.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def source_items(html: str) -> list[str]:
    found = re.search(r'<ul class="ev" id="sources">(.*?)</ul>', html, re.DOTALL)
    assert found, html
    return re.findall(r"<li>(.*?)</li>", found.group(1), re.DOTALL)


def test_web_evidence_badges_a_state_only_where_the_cli_says_one() -> None:
    html = evidence_html.summary(EVIDENCE, NOW)
    http, log, command = source_items(html)
    assert 'class="badge b-failed">FAILING<' in http
    assert "badge" not in log  # a log read is no health: no HEALTHY, as the CLI says none
    assert text_of(log).startswith("service_log last 10 lines · 5 with errors")
    assert text_of(command).startswith("version ok exit 0")  # the word once, as a badge
    assert "healthy" not in text_of(command).lower()
    for source in EVIDENCE["sources"]:  # the same words as the CLI's headline, in its order
        assert ev.headline_parts(source, NOW)[-1] in text_of(html)


def test_web_evidence_lists_last_actions_under_their_own_heading() -> None:
    html = evidence_html.summary(EVIDENCE, NOW)
    assert "fetch_logs" not in "".join(source_items(html))
    actions = html[html.index("<h3>Last actions</h3>") :]
    assert re.match(r'<h3>Last actions</h3><ul class="ev" id="actions"><li>', actions)
    fetch, restart = re.findall(r"<li>(.*?)</li>", actions)
    assert text_of(fetch) == "fetch_logs ok · exit 0 · 11 ms 2m ago"  # its status said once
    assert 'class="o-failed">failed · exit 1' in restart  # and coloured


def test_web_evidence_marks_error_lines_and_explains_the_mark() -> None:
    html = evidence_html.summary(EVIDENCE, NOW)
    assert '<code class="q err">! ERROR upstream timeout 0</code>' in html
    assert '<code class="q">INFO request 0 served</code>' in html
    assert ev.ERROR_MARK in text_of(html)
    quiet = {"sources": [EVIDENCE["sources"][2]], "actions": []}
    assert "marks an error line" not in evidence_html.summary(quiet, NOW)  # nothing to explain


def test_web_evidence_folds_a_long_quote_after_its_first_lines() -> None:
    log = source_items(evidence_html.summary(EVIDENCE, NOW))[1]
    shown, folded = log.split('<details class="more">')
    assert shown.count("<code") == evidence_html.SHOWN
    assert "<summary>7 more lines</summary>" in folded and folded.count("<code") == 7
