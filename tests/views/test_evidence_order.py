"""A log's evidence leads with what went wrong last: its error lines, then its newest, newest
first; the oldest quiet lines are the ones folded on a phone or left out (`… N more lines` in the
CLI) — from a real log file read by the file_tail source."""

from __future__ import annotations

import re
from pathlib import Path

from agentd.config import FileTailSource
from agentd.sources.file_tail import FileTailReader
from agentd.views import evidence as ev
from agentd.web import evidence_html
from tests.views.test_evidence import NOW, looks, only

# Fourteen quiet lines, then the two errors that matter (as the operator's service wrote them).
LOG = [f"INFO request {n} served" for n in range(14)] + [
    "ERROR db pool exhausted",
    "FATAL giving up after 3 retries",
]


async def log_world(tmp_path: Path) -> dict:
    path = tmp_path / "service.log"
    path.write_text("\n".join(LOG) + "\n")
    cfg = FileTailSource(type="file_tail", path=path, lines=16)
    return await looks(FileTailReader("service_log", cfg), 1)


async def test_evidence_log_quotes_errors_then_newest_first(tmp_path: Path) -> None:
    source = only(await log_world(tmp_path))
    quoted = [d["text"] for d in source["detail"]]
    assert quoted[:2] == ["FATAL giving up after 3 retries", "ERROR db pool exhausted"]
    assert quoted[2:] == [
        "INFO request 13 served",
        "INFO request 12 served",
        "INFO request 11 served",
    ]
    assert source["more"] == len(LOG) - ev.LOG_LINES


async def test_evidence_cli_says_how_many_lines_it_left_out(tmp_path: Path) -> None:
    shown = ev.lines(ev.summary(await log_world(tmp_path)), NOW, 80)
    assert shown[0] == "service_log  last 16 lines · 2 with errors"
    assert shown[1].endswith("! FATAL giving up after 3 retries")
    assert shown[-1].strip() == f"… {len(LOG) - ev.LOG_LINES} more lines"


async def test_evidence_web_shows_the_error_lines_before_the_fold(tmp_path: Path) -> None:
    html = evidence_html.summary(ev.summary(await log_world(tmp_path)), NOW)
    shown, folded = html.split('<details class="more">')
    assert "ERROR db pool exhausted" in shown and "FATAL giving up" in shown
    assert "ERROR" not in folded and "FATAL" not in folded
    assert re.search(r"… 11 older lines", folded)
