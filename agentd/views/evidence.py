"""The evidence summary: what the sources saw and what the run did, in lines read in five seconds.

Made by agentd from a world snapshot and the run's journal, never by the model. `summary()` gives
a JSON-able form (the web inbox renders it; `agentd inbox show --json` carries it); `lines()` the
text for a terminal, `brief_lines()` the text a notification may carry: agentd's own words and
numbers (states, times, HTTP codes, exit codes, counts, action names), never text from the world
(bodies, log lines, output) nor an action's arguments. Pure: no database, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agentd.models import JSON, Step, StepKind, StepStatus, Verdict
from agentd.text import canonical, compact, iso, one_line, safe
from agentd.views.changes import result_head
from agentd.views.times import clock, local, relative

ACTIONS = 5  # the run's last actions the summary names
LOG_LINES = 5  # a log tail's lines quoted: its error lines, then its newest (newest first)
OUTPUT_LINES = 3  # a command's last output lines
MCP_ITEMS = 4  # an MCP source's resources and tools named
DEFAULT_WIDTH = 100  # a view's width when the output is no terminal
# Words that mark a log line as an error (whole words, any case: `ERROR`, `level=error`, `Fatal`).
_ERROR = re.compile(
    r"\b(error|err|fatal|critical|crit|panic|emerg|alert|exception|traceback|failed|failure)\b",
    re.IGNORECASE,
)
# The fields of an MCP item that name it, in the order they are shown.
TITLE_FIELDS = ("title", "name", "summary", "subject", "status", "state", "message")
STATE_WORDS = {"unhealthy": "FAILING", "check_failed": "CHECK BROKEN", "healthy": "ok"}
_SKIPPED_ACTIONS = frozenset({"sleep"})  # waiting is no action an operator weighs
# What `!` before a quoted line means, wherever the summary is shown (`lines`, the web page).
ERROR_MARK = (
    "! marks an error line: one with an error word, or a failing check's output;"
    " a log shows its error lines first, then its newest"
)


# ── the JSON-able form ───────────────────────────────────────────────────────────────────────


def summary(
    world: JSON, steps: Sequence[Step] = (), healthy_until: Mapping[str, str] | None = None
) -> JSON:
    """`{"sources": [...], "actions": [...]}`: each source (failing ones first) as `name`, `kind`
    (http, log, command, mcp, other), `state` (healthy, unhealthy, check_failed or None), `since`
    (ISO 8601), `healthy_until` (ISO 8601: the last look that saw a failing or broken source
    healthy, from `healthy_until` by source name — the world's history, which
    agentd.operator.evidence reads — else None), `facts` (agentd's words and numbers) and
    `detail` (`{"text", "error"}` lines quoted from the world: a log's error lines first, then
    its newest, newest first) and `more` (a log's lines not quoted); each of the run's last actions
    as `seq`, `at`, `action`, `args`, `status` (ok, failed, running, refused, denied, expired)
    and `outcome` (the result in words)."""
    until = healthy_until or {}
    sources = [
        _source(str(name), obs, until.get(str(name)))
        for name, obs in world.items()
        if isinstance(obs, dict)
    ]
    sources.sort(key=lambda s: s["state"] not in ("unhealthy", "check_failed"))
    return {"sources": sources, "actions": _actions(steps), "started_by": started_by(steps)}


def started_by(steps: Sequence[Step]) -> JSON | None:
    """The event that started the run, as `event` (its name), `alert` (an alert's name),
    `status`, `since` (its startsAt), `labels` and `summary` (an annotation), or None."""
    start = next((s for s in steps if s.kind == StepKind.START), None)
    if start is None or not isinstance(start.data.get("event_id"), int):
        return None  # not started by a recorded event (a watched state's run shows its world)
    given = start.data.get("data")
    data: JSON = given if isinstance(given, dict) else {}
    found_labels = data.get("labels")
    labels: JSON = found_labels if isinstance(found_labels, dict) else {}
    found = data.get("annotations")
    notes: JSON = found if isinstance(found, dict) else {}
    summary = notes.get("summary") or notes.get("description")
    return {  # a sender's text, cut: pages, notifications and the JSON API show it whole
        "event": str(start.data["event"]), "event_id": start.data.get("event_id"),
        "alert": _cut(data.get("alertname")) or None, "status": _cut(data.get("status")),
        "since": _cut(data.get("startsAt")),
        "labels": {_cut(k): _cut(v) for k, v in sorted(labels.items())[:STARTED_LABELS]},
        "summary": _cut(summary, STARTED_SUMMARY) if summary else None,
    }  # fmt: skip


STARTED_LABELS = 20  # an alert's labels shown with the approval (Alertmanager's are a handful)
STARTED_FIELD = 200  # characters of one label, the alert's name, its status, its start
STARTED_SUMMARY = 500  # characters of its summary annotation


def _cut(value: Any, chars: int = STARTED_FIELD) -> Any:
    """A sender's string cut to `chars` (anything else as given: None stays None)."""
    return value[:chars] if isinstance(value, str) else value


def started_line(started: JSON) -> str:
    """`started by am.firing #12: HighLatency since 12:33:19 (service=checkout, severity=page)`."""
    text = f"started by {started['event']} #{started.get('event_id')}"
    if started.get("alert"):
        text += f": {started['alert']}"
    if started.get("since"):
        text += f" since {_clock(str(started['since']))}"
    if labels := started.get("labels"):
        text += " (" + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) + ")"
    return text


def kind_of(obs: JSON) -> str:
    """Which kind of source wrote `obs`, read from its shape (a snapshot names no types)."""
    if "lines" in obs:
        return "log"
    if "exit_code" in obs or "output" in obs:
        return "command"
    if "resources" in obs or "tools" in obs:
        return "mcp"
    if "status" in obs or "latency_ms" in obs or "body" in obs:
        return "http"
    return "other"


def _state(obs: JSON) -> str | None:
    if "ok" not in obs:
        return None
    if obs.get("check_failed"):
        return "check_failed"
    return "healthy" if obs["ok"] else "unhealthy"


def _source(name: str, obs: JSON, healthy_until: str | None = None) -> JSON:
    kind, state = kind_of(obs), _state(obs)
    until = healthy_until if state in ("unhealthy", "check_failed") else None
    facts: list[str] = []
    detail: list[JSON] = []
    if state == "check_failed":
        before = {True: "the service was healthy before", False: "unhealthy before"}
        if isinstance(obs.get("last_healthy"), bool) and not (until and obs["last_healthy"]):
            facts.append(before[obs["last_healthy"]])  # a time, if known, says it better
        detail.append(_line(obs.get("error"), error=True))
    elif kind == "http":
        facts, detail = _http(obs, state)
    elif kind == "log":
        facts, detail = _log(obs)
    elif kind == "command":
        facts, detail = _command(obs)
    elif kind == "mcp":
        facts, detail = _mcp(obs)
    elif obs.get("error"):
        detail.append(_line(obs["error"], error=True))
    else:
        detail.append(_line(compact(obs)))
    if state is not None and state != "healthy" and isinstance(obs.get("streak"), int):
        facts.insert(min(1, len(facts)), _looks(obs["streak"]))  # after the code it is about
    if state == "unhealthy" and isinstance(obs.get("episode"), int) and until is None:
        # A failing stretch after the first followed a healthy one (a broken check between
        # them is looked through: agentd.sources.with_history); when that look is still in
        # the history, its time says more (headline_parts).
        facts.append("healthy before then" if obs["episode"] > 1 else "never seen healthy")
    since = obs.get("since") if isinstance(obs.get("since"), str) else None
    detail = [d for d in detail if d["text"]]
    # A log's lines not quoted (the oldest quiet ones): the CLI says `… N more lines`.
    more = max(len(obs.get("lines") or []) - len(detail), 0) if kind == "log" else 0
    return {"name": name, "kind": kind, "state": state, "since": since, "healthy_until": until,
            "facts": facts, "detail": detail, "more": more}  # fmt: skip


def _line(text: object, *, error: bool = False) -> JSON:
    return {"text": "" if text is None else str(text).rstrip(), "error": error}


def _looks(streak: int) -> str:
    return "1 look" if streak == 1 else f"{streak} looks in a row"


def _http(obs: JSON, state: str | None) -> tuple[list[str], list[JSON]]:
    facts = [f"HTTP {obs['status']}"] if "status" in obs else ["no HTTP answer"]
    detail = [_line(obs["error"], error=True)] if obs.get("error") else []
    if isinstance(obs.get("body"), str) and obs["body"].strip():
        detail.append(_line(f"body: {' '.join(obs['body'].split())}"))
    return facts, detail


def _log(obs: JSON) -> tuple[list[str], list[JSON]]:
    """A log's facts and the lines it quotes: the error lines first, then the newest, each
    newest first — what an operator reads first on a phone is what went wrong last; the lines
    left out are the oldest quiet ones (`more` counts them)."""
    lines = [str(x) for x in obs.get("lines") or []]
    errors = sum(1 for x in lines if _ERROR.search(x))
    facts = [f"last {len(lines)} lines", f"{errors} with errors" if errors else "no errors"]
    newest = [_line(x, error=bool(_ERROR.search(x))) for x in reversed(lines)]
    newest.sort(key=lambda d: not d["error"])  # stable: each group stays newest first
    return facts, newest[:LOG_LINES]


def _command(obs: JSON) -> tuple[list[str], list[JSON]]:
    facts = [f"exit {obs['exit_code']}"] if "exit_code" in obs else []
    failed = obs.get("ok") is False
    detail = [_line(obs["error"], error=True)] if obs.get("error") else []
    for stream in ("output", "stderr"):
        text = obs.get(stream)
        if isinstance(text, str) and text.strip():
            tail = text.rstrip("\n").split("\n")[-OUTPUT_LINES:]
            prefix = "stderr: " if stream == "stderr" else ""
            detail += [_line(prefix + x, error=failed) for x in tail]
    return facts, detail


def _mcp(obs: JSON) -> tuple[list[str], list[JSON]]:
    resources, tools = obs.get("resources") or {}, obs.get("tools") or {}
    facts = [_count(len(resources), "resource"), _count(len(tools), "tool")]
    if obs.get("truncated"):
        facts.append(f"{len(obs['truncated'])} cut short")
    items = [*resources.items(), *tools.items()][:MCP_ITEMS]
    return facts, [_line(f"{name}: {_titles(content)}") for name, content in items]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _titles(content: Any) -> str:
    """An MCP item by its title fields: `title=Checkout down; status=open`, a list's first
    entries, or a text's first line."""
    if isinstance(content, dict):
        if isinstance(content.get("text"), str) and len(content) <= 3:  # a text resource
            return _titles(content["text"])
        named = [f"{k}={_scalar(content[k])}" for k in TITLE_FIELDS if k in content]
        return "; ".join(named) if named else f"{len(content)} fields"
    if isinstance(content, list):
        shown = " | ".join(_titles(x) for x in content[:3])
        return f"{len(content)} entries: {shown}" if content else "no entries"
    text = str(content).strip()
    return text.split("\n", 1)[0] if text else "(empty)"


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else compact(value)


def _actions(steps: Sequence[Step]) -> list[JSON]:
    """The run's last actions: what ran (and its result), what the harness refused, what the
    operator denied or let expire."""
    out: list[JSON] = []
    acts = {s.seq: s for s in steps if s.kind == StepKind.ACT}
    for s in steps:
        if not s.action or s.action in _SKIPPED_ACTIONS:
            continue
        if s.kind == StepKind.ACT and acts.get(s.seq) is s:
            if s.status == StepStatus.STARTED or s.result is None:
                out.append(_act(s, "running", "started; no result yet"))
            else:
                status = (
                    "ok" if s.result.get("ok", True) and not s.result.get("error") else "failed"
                )
                out.append(_act(s, status, result_head(s.result)))
        elif s.kind == StepKind.CHECK and s.verdict == Verdict.DENY:
            out.append(_act(s, "refused", f"refused: {s.data.get('rule') or 'policy'}"))
        elif s.kind == StepKind.WAKE and s.data.get("why") == "approval":
            how = {"denied": "denied by the operator", "expired": "the approval expired"}
            status = str(s.data.get("status"))
            if status in how and not s.data.get("withdrew"):
                out.append(_act(s, status, how[status]))
    return out[-ACTIONS:]


def _act(step: Step, status: str, outcome: str) -> JSON:
    at = step.completed_at or step.created_at
    return {"seq": step.seq, "at": iso(at), "action": step.action, "args": step.args,
            "status": status, "outcome": outcome}  # fmt: skip


# ── the raw world an item quotes ─────────────────────────────────────────────────────────────

# How a run's texts quote the world (agentd/runs/acting.py request_approval, recovery.py
# ask_unknown_outcome): a last line `World at the time: <data>…</data>` or `World now: …`.
_QUOTED_WORLD = re.compile(r"\nWorld (?:at the time|now): (<data>.*)\Z", re.DOTALL)


def split_world(body: str) -> tuple[str, str | None]:
    """An item's body without the raw world it quotes, and that quote (None: there is none)."""
    found = _QUOTED_WORLD.search(body)
    return (body, None) if found is None else (body[: found.start()], found.group(1))


def raw_world(world: object, quoted: str | None = None) -> str | None:
    """The raw world as indented canonical JSON: the item's own snapshot, else the one its text
    quoted (as quoted when it does not parse); None when there is neither."""
    if isinstance(world, dict) and world:
        return canonical(world)
    if quoted is None:
        return None
    inner = quoted.removeprefix("<data>").removesuffix("</data>")
    try:
        return canonical(json.loads(inner))
    except ValueError:
        return safe(quoted, multiline=True, continuation="")


# ── text ─────────────────────────────────────────────────────────────────────────────────────


def headline(source: JSON, now: datetime | None) -> str:
    """`FAILING since Dec 2 12:33:19 UTC (4m ago) · HTTP 500 · 8 looks in a row`: agentd's words
    and numbers only; without `now` no relative time (a message read later)."""
    return " · ".join(headline_parts(source, now))


def headline_parts(source: JSON, now: datetime | None) -> list[str]:
    """The headline's parts: the state word with `since …`, then `fact_parts`."""
    word, since = state_word(source), since_part(source, now)
    lead = [f"{word} {since}" if since else word] if word else []
    return lead + fact_parts(source, now)


def state_word(source: JSON) -> str | None:
    """The word that leads a source's headline (FAILING, CHECK BROKEN, ok), or None where no
    state is said: a source that reports no health, and a log read healthy — a log read is no
    health, its line counts say it (`ok` would read as "no errors"). The one decision every
    surface follows: the CLI prints the word, the web shows it as the source's badge."""
    state = source.get("state")
    if not state or (source["kind"] == "log" and state == "healthy"):
        return None
    return STATE_WORDS.get(str(state), "seen")


def since_part(source: JSON, now: datetime | None) -> str | None:
    """`since Dec 2 12:33:19 UTC (4m ago)` after a state word that has a start (not `ok`)."""
    if state_word(source) is None or source.get("state") == "healthy" or not source.get("since"):
        return None
    return safe(f"since {_when(source['since'], now)}")


def fact_parts(source: JSON, now: datetime | None) -> list[str]:
    """What follows the state word: the kind of a source with no health, the facts, and the
    last healthy look of a failing source (`healthy until 12:31:40 UTC (9m ago)`)."""
    parts = [] if source.get("state") else [source["kind"]]
    parts += source["facts"]
    if until := source.get("healthy_until"):
        said = "healthy until" if source.get("state") == "unhealthy" else "last seen healthy"
        parts.append(f"{said} {_when(until, now)}")
    return [safe(p) for p in parts]


def _packed(parts: list[str], room: int) -> list[str]:
    """Parts joined by ` · ` in lines of at most `room` columns (a part longer is cut)."""
    out: list[str] = []
    for part in (one_line(p, room) for p in parts):
        if out and len(out[-1]) + 3 + len(part) <= room:
            out[-1] += " · " + part
        else:
            out.append(part)
    return out or [""]


def _when(iso_text: str, now: datetime | None) -> str:
    try:
        at = datetime.fromisoformat(iso_text.replace("Z", "+00:00"))
    except ValueError:
        return safe(iso_text)
    if now is None:
        return local(at, at, seconds=True)
    return f"{local(at, now, seconds=True)} ({relative(at, now)})"


def lines(evidence: JSON, now: datetime | None, width: int | None = None) -> list[str]:
    """The summary for a terminal, each line at most `width` columns (cut with …): a source's
    headline, then its quoted lines under it (`!` marks an error; a log's newest first, then
    `… N more lines`); then the run's last actions."""
    width = max(width or DEFAULT_WIDTH, 40)
    sources = evidence.get("sources") or []
    pad = max([len(s["name"]) for s in sources] + [0]) + 2
    pad = min(pad, width // 3)
    out: list[str] = []
    if started := evidence.get("started_by"):  # an alert or webhook is quoted data, cut to one line
        out.append(one_line(started_line(started), width))
        if started.get("summary"):
            out.append("  " + one_line(str(started["summary"]), width - 2))
    for s in sources:
        first, *more = _packed(headline_parts(s, now), width - pad)
        out.append(f"{one_line(s['name'], pad - 2):<{pad}}{first}")
        out += [" " * pad + line for line in more]
        for d in s["detail"]:
            mark = "! " if d["error"] else "  "  # `!`: a line with an error word, or a failure's
            out.append(" " * pad + mark + one_line(d["text"], width - pad - 2))
        if s.get("more"):
            out.append(" " * pad + f"  … {_count(s['more'], 'more line')}")
    if actions := evidence.get("actions"):
        out.append("last actions:")
        size = min(max(len(a["action"]) for a in actions), width // 3)
        for a in actions:
            head = f"  {_clock(a['at'])}  {one_line(a['action'], size):<{size}}  "
            out.append(head + one_line(a["outcome"], max(width - len(head), 10)))
    return out


def _clock(iso_text: str) -> str:
    try:
        return clock(datetime.fromisoformat(iso_text.replace("Z", "+00:00")))
    except ValueError:
        return "?"


def brief_lines(evidence: JSON) -> list[str]:
    """What a notification may say: each source's name and headline (absolute times), and the
    run's last actions by name and status — no text from the world, no arguments, no results."""
    out = [f"{safe(s['name'])}: {headline(s, None)}" for s in evidence.get("sources") or []]
    if started := evidence.get("started_by"):  # the event's name and alert, no sender's text
        alert = f": {safe(str(started['alert']))[:80]}" if started.get("alert") else ""
        out.insert(0, f"started by {safe(started['event'])}{alert}")
    if actions := evidence.get("actions"):
        done = ", ".join(f"{safe(a['action'])} {a['status']}" for a in actions)
        out.append(f"last actions: {done}")
    return out
