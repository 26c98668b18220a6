"""Views of the inner loop's artifacts: the list, one version with the judge's findings beside its
text, and the diff between two versions. Everything written by a model is neutralised (`safe`)."""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Sequence
from datetime import datetime

from agentd.models import JSON, Run
from agentd.text import one_line, safe, screen
from agentd.views.tables import table
from agentd.views.times import stamp

SIDE_BY_SIDE_MIN = 110  # terminal columns below which findings go under the text
MARK = {True: "✔", False: "✘"}


def artifacts_table(rows: Sequence[JSON], now: datetime) -> str:
    return table(
        ("artifact", "goal", "versions", "verdict", "build", "updated", "request"),
        [
            (
                r["artifact"],
                r["goal_id"],
                r["versions"],
                r["status"],
                r["run_status"],
                stamp(r["updated_at"], now),
                r["request"],
            )
            for r in rows
        ],
        {"request": 50, "updated": 24},
        empty='no artifacts yet — make one: agentd build GOAL_ID "what to build"',
    )


def requirements_text(requirements: Sequence[JSON]) -> str:
    """Each requirement with where it came from (operator, request, memory, goal, check)."""
    return "\n".join(
        f"  {r['id']:<4} [{r['source']}] {one_line(r['text'], 100)}" for r in requirements
    )


def findings_lines(verdict: JSON | None, width: int) -> list[str]:
    if verdict is None:
        return ["not judged yet"]
    head = "PASSED" if verdict["passed"] else f"FAILED: {', '.join(verdict['failing'])}"
    out = [f"verdict: {head}"]
    if verdict.get("summary"):
        out += textwrap.wrap(f"judge: {safe(verdict['summary'])}", width) or [""]
    for f in verdict["findings"]:
        out.append("")
        label = f"{MARK[bool(f['pass'])]} {f['id']} [{f['source']}, by {f['by']}]"
        out += textwrap.wrap(f"{label} {safe(f['text'])}", width)
        if f.get("evidence"):
            quoted = " (quoted)" if f.get("quoted") else ""
            out += textwrap.wrap(f"evidence{quoted}: “{safe(f['evidence'])}”", width,
                                 initial_indent="  ", subsequent_indent="    ")  # fmt: skip
        if f.get("fix") and not f["pass"]:
            out += textwrap.wrap(f"fix: {safe(f['fix'])}", width, initial_indent="  ",
                                 subsequent_indent="    ")  # fmt: skip
        if f.get("needs_info"):
            out.append("  needs information the agent lacks")
    return out


def _text_lines(text: str, width: int) -> list[str]:
    out: list[str] = []
    for line in text.split("\n"):
        out += textwrap.wrap(safe(line), width, replace_whitespace=False, drop_whitespace=True) or [
            ""
        ]
    return out


def artifact_view(
    art: JSON, requirements: Sequence[JSON], request: str, of: int, now: datetime, width: int
) -> str:
    """One version: header, requirements (with sources), then text and findings side by side
    (stacked on a narrow terminal)."""
    cut = (
        f" (the model wrote {art['chars']}; cut to the bound)"
        if art["chars"] > len(art["text"])
        else ""
    )
    head = [
        f"artifact {art['run_id']} v{art['version']} of {of} — {art['status']}"
        f" — goal {art['goal_id']} — {stamp(art['created_at'], now)}",
        f"request: {one_line(request, 200)}",
        f"model: {safe(art.get('model') or '?')}; {len(art['text'])} characters{cut}",
        "requirements:",
        requirements_text(requirements),
        "",
    ]
    if width >= SIDE_BY_SIDE_MIN:
        left_w = (width - 3) * 3 // 5
        right_w = width - 3 - left_w
        left = _text_lines(art["text"], left_w)
        right = findings_lines(art.get("verdict"), right_w)
        rows = max(len(left), len(right))
        left += [""] * (rows - len(left))
        right += [""] * (rows - len(right))
        body = [f"{a:<{left_w}} │ {b}".rstrip() for a, b in zip(left, right, strict=True)]
        rule = "─" * left_w + "─┬─" + "─" * right_w
        title = f"{'TEXT':<{left_w}} │ JUDGE'S FINDINGS"
        return screen("\n".join([*head, title, rule, *body]))
    text = _text_lines(art["text"], width)
    findings = findings_lines(art.get("verdict"), width)
    return screen("\n".join([*head, "TEXT", "─" * width, *text, "", "JUDGE'S FINDINGS",
                             "─" * width, *findings]))  # fmt: skip


def diff_lines(a: JSON, b: JSON) -> list[str]:
    return list(
        difflib.unified_diff(
            a["text"].splitlines(), b["text"].splitlines(),
            fromfile=f"artifact {a['run_id']} v{a['version']}",
            tofile=f"artifact {b['run_id']} v{b['version']}", lineterm="",
        )
    )  # fmt: skip


def diff_view(a: JSON, b: JSON) -> str:
    lines = diff_lines(a, b)
    if not lines:
        return f"v{a['version']} and v{b['version']} are the same"
    return "\n".join(safe(line) for line in lines)


def pending_view(run: Run, request: str, requirements: Sequence[JSON], now: datetime) -> str:
    """A build with no draft yet: its state, what it waits for, its requirements so far."""
    wait = run.wait or {}
    waiting = (
        f" — waiting for your answer to inbox item {wait.get('item_id')}"
        f" (agentd inbox show {wait.get('item_id')})"
        if wait.get("kind") == "inbox"
        else ""
    )
    lines = [
        f"artifact {run.run_id}: no version yet — build {run.status}{waiting}",
        f"request: {one_line(request, 200)}",
        f"started: {stamp(run.created_at, now)}",
    ]
    if requirements:
        lines += ["requirements:", requirements_text(requirements)]
    return screen("\n".join(lines))
