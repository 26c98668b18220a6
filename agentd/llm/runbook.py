"""The `runbook` provider: a small, readable, deterministic service-watch policy behind the Model
interface — the embedded default when no API key is configured. A real model replaces it with a
config change; the engine, harness and journal do not know the difference.

    unhealthy, no logs yet            → fetch logs (refused or failing: go on without them)
    unhealthy, not restarted yet      → restart, then wait and look again
    still failing after a restart     → propose a rollback (the harness gates it)
    an action refused or failing      → ask the operator, quoting the rule or the error
    the rollback not helping          → ask the operator
    healthy for N looks in a row      → finish, with an incident summary

The operator's answer to a question of the run is read by its first word (any case):

    stop    finish the run now (failed, with a summary)
    retry   start over: what happened before the answer no longer counts, so the logs, the
            restart and the rollback are tried again — each through the policy, rate limits and
            approvals as the first time
    skip    go on without the refused or failing action; with nothing left to try, finish
    else    (or no answer before the question expired) finish, quoting the answer

so a refused action is never proposed again without the operator saying so. The question agentd
asks itself after a stop mid-action ("Did it happen?", agentd/runs/recovery.py) also takes

    yes     the action happened: it counts as done, and the runbook goes on from there
    no      it did not happen: as retry, so the runbook may run it again through the policy
"""

from __future__ import annotations

import json
from typing import Any

from agentd.config import RunbookModel
from agentd.llm import ModelReply, ModelRequest, mechanical_summary
from agentd.models import JSON


class Runbook:
    def __init__(self, name: str, cfg: RunbookModel) -> None:
        self.name = name
        self.cfg = cfg

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.purpose == "summarize":
            text = json.dumps({"summary": mechanical_summary(request.context)})
            return ModelReply(text=text, model="runbook")
        if request.purpose == "checkin":  # a service watch acts on events, not on check-ins
            return ModelReply(text=json.dumps(CHECKIN_NOTHING), model="runbook")
        decision = decide(self.cfg, request.context)
        return ModelReply(text=json.dumps(decision), model="runbook", stop_reason="end")


CHECKIN_NOTHING: JSON = {
    "reason": "runbook: the service watch acts on health events; nothing to add",
    "next_look_in_s": None,
    "verdict": {"kind": "nothing"},
}


def _action(kind: str, reason: str, **args: Any) -> JSON:
    return {"reason": reason, "action": {"kind": kind, **args}}


ANSWERS = ("stop", "retry", "skip")
VOCABULARY = "answer stop (finish the run), retry (start over) or skip (go on without it)"
# The yes-or-no question of an outcome agentd cannot tell (wait why "unknown_outcome"): the
# word each answer stands for. "happened" marks the unknown action done (_settled).
OUTCOME_ANSWERS = {"yes": "happened", "y": "happened", "no": "retry", "n": "retry"}


def decide(cfg: RunbookModel, ctx: JSON) -> JSON:
    """The next action for the world and history in `ctx` (see engine's ModelRequest.context)."""
    menu = set(ctx.get("menu", []))
    history: list[JSON] = _settled(ctx.get("history", []))
    health: JSON = ctx.get("world", {}).get(cfg.health_source) or {}
    if "healthy" not in health:
        return _action(
            "finish", "no health reading", outcome="failed",
            summary=f"No health data from source {cfg.health_source!r}; check the agent's sources.",
        )  # fmt: skip
    answers = _answers(history)
    if answers and answers[-1][1] == "stop":
        said = f"the operator answered {answers[-1][2]!r}"
        return _action(
            "finish", said, outcome="failed",
            summary=f"Stopped: {said}. {_steps_taken(history)}",
        )  # fmt: skip
    # After "retry" the runbook starts over: only what happened since counts.
    since = max((i + 1 for i, word, _ in answers if word == "retry"), default=0)
    if health["healthy"]:
        if health.get("streak", 1) >= cfg.healthy_checks:
            return _action(
                "finish", f"healthy for {health['streak']} looks in a row", outcome="succeeded",
                summary=summary(cfg, history, health),
            )  # fmt: skip
        return _sleep(cfg, f"healthy again ({health.get('streak', 1)} look); confirming")
    return _unhealthy(cfg, menu, history, since, health)


def _unhealthy(
    cfg: RunbookModel, menu: set[str], history: list[JSON], since: int, health: JSON
) -> JSON:
    failing = f"health failing since {health.get('since', '?')} ({_symptom(health)})"
    tail = history[since:]
    executed = [h["action"] for h in tail if h["kind"] == "act" and h["status"] == "done"]
    skipped = _skipped(cfg, tail)
    steps = (
        (cfg.logs_action, "read the logs first"),
        (cfg.restart_action, "a restart is cheap and safe"),
    )
    for action, why in steps:
        if action not in menu or action in executed or action in skipped:
            continue
        blocked = _blocked(tail, action)
        if blocked is None:
            return _action(action, f"{failing}; {why}")
        if action != cfg.logs_action:  # the logs only inform: the runbook goes on without them
            return _stuck(menu, history, since + blocked[0], f"{action} {blocked[1]}", failing)
    last = next((a for a in reversed(executed) if a != cfg.logs_action), None)
    if last in (cfg.restart_action, cfg.rollback_action):
        return _sleep(cfg, f"give the {last} a moment, then look again")
    rollback = cfg.rollback_action
    if rollback in menu and rollback not in executed and rollback not in skipped:
        blocked = _blocked(tail, rollback)
        if blocked is None:
            return _action(rollback, f"still failing after a restart; {failing}")
        return _stuck(menu, history, since + blocked[0], f"the {rollback} {blocked[1]}", failing)
    if rollback in executed:
        done_at = max(
            i for i, h in enumerate(tail) if h["kind"] == "act" and h["action"] == rollback
        )
        return _stuck(menu, history, since + done_at, f"the {rollback} did not help", failing)
    return _stuck(menu, history, since, "the runbook has nothing left to try", failing)


def _answers(history: list[JSON]) -> list[tuple[int, str | None, str]]:
    """The operator's answers to the run's questions: (index, vocabulary word or None, text);
    a question that expired unanswered counts as an answer with no word."""
    found = []
    for i, h in enumerate(history):
        if h["kind"] != "wake" or h.get("woke_by") != "inbox" or h.get("why") == "approval":
            continue
        if h.get("item_kind") not in (None, "question"):
            continue
        text = str(h.get("answer") or "") if h.get("status") == "answered" else ""
        first = text.strip().lower().split(maxsplit=1)
        word = first[0].strip(".,;:!") if first else None
        if h.get("why") == "unknown_outcome" and word in OUTCOME_ANSWERS:
            word = OUTCOME_ANSWERS[word]
        found.append((i, word if word in (*ANSWERS, "happened") else None, text or "(no answer)"))
    return found


def _settled(history: list[JSON]) -> list[JSON]:
    """`history` with each action whose outcome agentd could not tell marked done where the
    operator answered that it happened (the last such action before the answer)."""
    out = list(history)
    for i, word, _ in _answers(history):
        if word != "happened":
            continue
        for j in range(i - 1, -1, -1):
            if out[j]["kind"] == "act" and out[j].get("outcome") == "unknown":
                out[j] = {**out[j], "status": "done", "ok": True, "outcome": "happened"}
                break
    return out


def _blocked(tail: list[JSON], action: str) -> tuple[int, str] | None:
    """The last refusal or failure of `action` in `tail`: (index, what happened), or None."""
    for i in range(len(tail) - 1, -1, -1):
        h = tail[i]
        if h.get("action") != action:
            continue
        if h["kind"] == "check" and h["verdict"] == "deny":
            return i, f"was refused ({h.get('rule') or 'policy'})"
        refused = h["kind"] == "wake" and h.get("status") in ("denied", "expired")
        if refused and not h.get("withdrew"):  # withdrawn: the world changed, not a refusal
            said = str(h.get("answer") or "no reason given").removeprefix("expired: ")
            how = "denied by the operator" if h["status"] == "denied" else "its approval expired"
            return i, f"was refused: {how} ({said})"
        if h["kind"] == "act" and h["status"] != "started" and h.get("ok") is False:
            return i, f"failed ({h.get('error') or 'no detail'})"
        if h["kind"] == "act" and h["status"] == "done":
            return None  # it worked after all
    return None


def _skipped(cfg: RunbookModel, tail: list[JSON]) -> set[str]:
    """Actions the operator said to go on without: blocked before a "skip" answer."""
    skipped: set[str] = set()
    for i, word, _ in _answers(tail):
        if word != "skip":
            continue
        for action in (cfg.logs_action, cfg.restart_action, cfg.rollback_action):
            if _blocked(tail[:i], action) is not None:
                skipped.add(action)
    return skipped


def _stuck(menu: set[str], history: list[JSON], at: int, problem: str, failing: str) -> JSON:
    """Something the runbook cannot get past alone (at history index `at`): ask the operator,
    with the rule or error; once they have answered (and not retry or skip), finish."""
    answered = [(word, text) for i, word, text in _answers(history) if i > at]
    if not answered and "ask" in menu:
        question = f"{problem}, and {failing}. What now? {VOCABULARY}."
        return _action("ask", "the runbook needs the operator", question=question)
    why = f"{problem}; the operator answered {answered[-1][1]!r}" if answered else problem
    if answered and answered[-1][0] is None:
        why += f" (the runbook understands {', '.join(ANSWERS)})"
    return _action(
        "finish", why, outcome="failed", summary=f"{failing}; {why}. " + _steps_taken(history)
    )


def _sleep(cfg: RunbookModel, reason: str) -> JSON:
    return _action("sleep", reason, seconds=cfg.recheck_s)


def _symptom(health: JSON) -> str:
    if "status" in health:
        return f"HTTP {health['status']}"
    return str(health.get("error", "unreachable"))


def _steps_taken(history: list[JSON]) -> str:
    """What ran, what failed and what was refused (by policy or the operator): a summary that
    names only what ran hides the rollback that was denied."""
    taken: list[str] = []
    failed: list[str] = []
    refused: list[str] = []
    unknown: list[str] = []
    for h in history:
        action = h.get("action")
        if not action or action == "sleep":
            continue
        if h["kind"] == "act" and (h.get("outcome") == "unknown" or h["status"] == "started"):
            unknown.append(action)  # its intent was journaled: it may have happened
        elif h["kind"] == "act" and h.get("ok") is False:
            failed.append(f"{action} ({h.get('error') or 'no detail'})")
        elif h["kind"] == "act" and h["status"] == "done" and action != "notify":
            taken.append(action)
        elif h["kind"] == "check" and h.get("verdict") == "deny":
            refused.append(f"{action} ({h.get('rule') or 'policy'})")
        elif h["kind"] == "wake" and h.get("why") == "approval" and not h.get("withdrew"):
            how = {"denied": "denied by the operator", "expired": "approval expired"}
            if h.get("status") in how:
                refused.append(f"{action} ({how[h['status']]})")
    parts = ["Actions taken: " + ", ".join(taken) + "."] if taken else []
    if unknown:
        parts.append(
            "Started, outcome unknown (agentd stopped during it): " + ", ".join(unknown) + "."
        )
    if not parts:
        parts.append("No action was taken." if not failed else "No action succeeded.")
    if failed:
        parts.append("Failed: " + ", ".join(failed) + ".")
    if refused:
        parts.append("Refused: " + ", ".join(refused) + ".")
    return " ".join(parts)


def summary(cfg: RunbookModel, history: list[JSON], health: JSON) -> str:
    """A short incident summary from the journal: what failed, what was done, how it ended."""
    trigger = next((h.get("trigger") or {} for h in history if h["kind"] == "start"), {})
    seen = trigger.get("data") or {}
    started = f"since {seen['since']} ({_symptom(seen)})" if "since" in seen else None
    withdrew = [
        h.get("why") for h in history
        if h["kind"] == "wake" and h.get("woke_by") == "world" and h.get("withdrew")
    ]  # fmt: skip
    withdrawn = "approval" in withdrew or None in withdrew
    approved = any(
        h["kind"] == "wake" and h.get("action") == cfg.rollback_action
        and h.get("status") == "approved"
        for h in history
    )  # fmt: skip
    parts = [f"Unhealthy: {started}." if started else "The service was checked."]
    parts.append(_steps_taken(history))
    if approved:
        parts.append("The rollback ran once, after the operator approved it.")
    if withdrawn:
        parts.append(
            "It recovered on its own while the rollback waited; the approval was withdrawn."
        )
    if "question" in withdrew:
        parts.append(
            "It recovered while the operator's answer was awaited; the question was withdrawn."
        )
    parts.append(f"Healthy again since {health.get('since', '?')} ({_symptom(health)}).")
    return " ".join(parts)
