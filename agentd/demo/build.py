"""`agentd demo --build`: after the service-watch run, build its incident report (the inner loop).

The material is the run's own journal — when health changed, what ran, who approved the rollback —
written as `Key: value` facts. The build is judged against three requirements (a timeline, the root
cause, the approved action and who approved it) and a deterministic sections check; the embedded
`template` writer drafts from the request first, the judge finds what is missing, one revision adds
it. Real processes throughout: the same daemon, the same journal, no API key.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentd.inner import spec as build_spec
from agentd.inner.start import start
from agentd.models import InboxKind, Run, Step, StepKind, StepStatus, utcnow
from agentd.operator import inbox, runs
from agentd.operator.home import HomeStore
from agentd.views.build import artifact_view, findings_lines

BUILD_TIMEOUT_S = 30.0
REQUIREMENTS = ("a timeline", "the root cause", "the approved action and who approved it")

# Appended to the demo's config: the writer and judge, and the check that always wins.
BUILD_CONFIG = """
# The inner loop: `agentd build` drafts, judges and revises. The embedded template writer and
# judge need no API key; name a real model here (model = / judge_model =) for real use.
[models.writer]
provider = "template"

[agents.{agent}.build]
model = "writer"
max_revisions = 2
checks = [{{ kind = "sections", sections = ["Timeline", "Root cause"] }}]
"""


def _at(dt: datetime) -> str:
    return dt.astimezone().strftime("%H:%M:%S")


def material(store: HomeStore, run: Run) -> str:
    """The incident, as facts from the run's journal and inbox (nothing invented)."""
    steps: list[Step] = runs.steps_of(store, run.run_id)
    items = inbox.items_of_run(store, run.run_id, show_all=True)
    lines: list[str] = [f"Summary: run {run.run_id} {run.status}: {run.summary or ''}"[:300]]
    for s in steps:
        if s.kind == StepKind.START:
            lines.append(f"Timeline: {_at(s.created_at)} run {run.run_id} started ({run.trigger})")
        elif s.kind == StepKind.OBSERVE:
            for name, change in (s.data.get("changes") or {}).items():
                if said := _change(name, change):
                    lines.append(f"Timeline: {_at(s.created_at)} {said}")
        elif s.kind == StepKind.ACT and s.status != StepStatus.STARTED:
            ok = "ok" if (s.result or {}).get("ok", s.status == StepStatus.DONE) else "failed"
            lines.append(f"Timeline: {_at(s.created_at)} {s.action} ran: {ok}")
        elif s.kind == StepKind.WAKE and s.data.get("item_kind") == InboxKind.APPROVAL:
            lines.append(f"Timeline: {_at(s.created_at)} {s.data.get('action')} "
                         f"{s.data.get('status')} (inbox item {s.data.get('item_id')})")  # fmt: skip
        elif s.kind == StepKind.FINISH:
            lines.append(f"Timeline: {_at(s.created_at)} run {s.data.get('status')}")
    world = _world_at_approval(items)
    deployed: str = str((world.get("deployed") or {}).get("output", "")).strip()
    errors = [x for x in (world.get("service_log") or {}).get("lines", []) if "ERROR" in x]
    if deployed or errors:
        cause = f"the deploy {deployed!r} shortly before /health failed" if deployed else ""
        lines.append(f"Root cause: {cause}" + (f"; the log says {errors[-1]!r}" if errors else ""))
    for item in items:
        if item.kind == InboxKind.APPROVAL:
            lines.append(f"Action: {item.action} {item.args or {}} (inbox item {item.item_id}, "
                         f"{item.status})")  # fmt: skip
            if item.resolved_at is not None:
                lines.append(f"Approved by: the operator — {item.answer or item.status} — at "
                             f"{_at(item.resolved_at)}")  # fmt: skip
    return "\n".join(lines)


def _change(name: str, change: Any) -> str:
    """A health or deploy change in words; other changes (log lines) are left to the log."""
    if not isinstance(change, dict):
        return ""
    status = change.get("status")
    if isinstance(status, list) and len(status) == 2:
        return f"{name}: HTTP {status[0]} → {status[1]}"
    output = change.get("output")
    if isinstance(output, list) and len(output) == 2:
        return f"{name}: {str(output[1]).split()[0] if str(output[1]).split() else output[1]}"
    return ""


def _world_at_approval(items: list[Any]) -> dict[str, Any]:
    for item in items:
        if item.kind == InboxKind.APPROVAL and isinstance(item.data.get("world"), dict):
            return dict(item.data["world"])
    return {}


def run(
    store: HomeStore, goal_id: int, watched: Run, say: Callable[[str], None], t0: float
) -> bool:
    """Build the incident report of `watched`, narrating each step; True when it passed."""
    say("\n— the inner loop: build the incident report from the run's journal —")
    spec = build_spec.make_spec(
        f"an incident report with a timeline for run {watched.run_id}",
        list(REQUIREMENTS),
        material(store, watched),
    )
    build = start(store, goal_id, spec).run_id
    say(
        f"• build {build}: requirements "
        + "; ".join(f"R{i} {r}" for i, r in enumerate(REQUIREMENTS, 1))
        + "; plus a sections check (Timeline, Root cause) that always wins over the judge"
    )
    shown: set[int] = set()
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    current = runs.get_run(store, build)
    while time.monotonic() < deadline:
        current = runs.get_run(store, build)
        for s in runs.steps_of(store, build):
            if s.seq in shown or s.status == StepStatus.STARTED:
                continue
            shown.add(s.seq)
            if line := _step(s):
                say(f"  {time.monotonic() - t0:5.1f}s  {line}")
        if current.status.finished:
            break
        time.sleep(0.05)
    versions = runs.build_versions(store, build)[1] or []
    if not versions:
        say(f"the build did not draft anything within {BUILD_TIMEOUT_S:g}s")
        return False
    if len(versions) > 1:
        say("\n  v1's verdict (what the revision fixed):")
        for line in findings_lines(versions[0]["verdict"], 90):
            say(f"     {line}")
    last = versions[-1]
    _request, reqs = _plan(store, build)
    width = min(shutil.get_terminal_size((120, 40)).columns, 160)
    say("")
    say(artifact_view(last, reqs, spec["request"], len(versions), utcnow(), width))
    say(f"\nbuild {build} {current.status}; see it again: agentd artifact show {build}"
        f" · agentd artifact diff {build}")  # fmt: skip
    return current.status == "succeeded"


def _plan(store: HomeStore, build: int) -> tuple[str, list[dict[str, Any]]]:
    steps = runs.steps_of(store, build)
    plans = [s for s in steps if s.kind == StepKind.PLAN]
    return "", list(plans[-1].data.get("requirements", [])) if plans else []


def _step(s: Step) -> str:
    if s.kind == StepKind.PLAN:
        reqs = s.data.get("requirements", [])
        return f"plan      {len(reqs)} requirements fixed (sources: " + ", ".join(
            sorted({r["source"] for r in reqs})) + ")"  # fmt: skip
    if s.kind == StepKind.GENERATE:
        what = "revision" if s.data.get("revision") else "first draft"
        return f"generate  v{s.data.get('version')} ({what}, {s.data.get('chars')} chars)"
    if s.kind == StepKind.JUDGE:
        v = s.data.get("verdict") or {}
        head = "passed" if v.get("passed") else "fails " + ", ".join(v.get("failing", []))
        return f"judge     v{s.data.get('version')}: {head}"
    if s.kind == StepKind.FINISH:
        return f"finish    {s.data.get('status')}"
    return ""
