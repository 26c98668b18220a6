"""The `runbook` provider: a small, readable, deterministic service-watch policy behind the Model
interface — the embedded default when no API key is configured. A real model replaces it with a
config change; the engine, harness and journal do not know the difference.

    unhealthy, no logs yet            → fetch logs
    unhealthy, not restarted yet      → restart, then wait and look again
    still failing after a restart     → propose a rollback (the harness gates it)
    rollback refused or not helping   → ask the operator / finish failed
    healthy for N looks in a row      → finish, with an incident summary
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


def decide(cfg: RunbookModel, ctx: JSON) -> JSON:
    """The next action for the world and history in `ctx` (see engine's ModelRequest.context)."""
    menu = set(ctx.get("menu", []))
    history: list[JSON] = ctx.get("history", [])
    health: JSON = ctx.get("world", {}).get(cfg.health_source) or {}
    if "healthy" not in health:
        return _action(
            "finish", "no health reading", outcome="failed",
            summary=f"No health data from source {cfg.health_source!r}; check the agent's sources.",
        )  # fmt: skip
    executed = [h["action"] for h in history if h["kind"] == "act" and h["status"] == "done"]
    if health["healthy"]:
        if health.get("streak", 1) >= cfg.healthy_checks:
            return _action(
                "finish", f"healthy for {health['streak']} looks in a row", outcome="succeeded",
                summary=summary(cfg, history, health),
            )  # fmt: skip
        return _sleep(cfg, f"healthy again ({health.get('streak', 1)} look); confirming")
    failing = f"health failing since {health.get('since', '?')} ({_symptom(health)})"
    if cfg.logs_action in menu and cfg.logs_action not in executed:
        return _action(cfg.logs_action, f"{failing}; read the logs first")
    if cfg.restart_action in menu and cfg.restart_action not in executed:
        return _action(cfg.restart_action, f"{failing}; a restart is cheap and safe")
    last = next((a for a in reversed(executed) if a != cfg.logs_action), None)
    if last in (cfg.restart_action, cfg.rollback_action):
        return _sleep(cfg, f"give the {last} a moment, then look again")
    refused = _rollback_refused(cfg, history)
    if cfg.rollback_action in menu and cfg.rollback_action not in executed and not refused:
        return _action(cfg.rollback_action, f"still failing after a restart; {failing}")
    why = "the rollback was refused" if refused else "the rollback did not help"
    if "ask" in menu and "ask" not in executed:
        return _action("ask", "runbook exhausted", question=f"{why} and {failing}. What now?")
    return _action(
        "finish", why, outcome="failed", summary=f"{failing}; {why}. " + _steps_taken(history)
    )


def _sleep(cfg: RunbookModel, reason: str) -> JSON:
    return _action("sleep", reason, seconds=cfg.recheck_s)


def _symptom(health: JSON) -> str:
    if "status" in health:
        return f"HTTP {health['status']}"
    return str(health.get("error", "unreachable"))


def _rollback_refused(cfg: RunbookModel, history: list[JSON]) -> bool:
    for h in history:
        if h.get("action") != cfg.rollback_action:
            continue
        if h["kind"] == "check" and h["verdict"] == "deny":
            return True
        if (
            h["kind"] == "wake"
            and h.get("status") in ("denied", "expired")
            and not h.get("withdrew")
        ):
            return True
    return False


def _steps_taken(history: list[JSON]) -> str:
    done = [h["action"] for h in history if h["kind"] == "act" and h["status"] == "done"]
    taken = [a for a in done if a not in ("sleep", "notify")]
    return ("Actions taken: " + ", ".join(taken) + ".") if taken else "No action was taken."


def summary(cfg: RunbookModel, history: list[JSON], health: JSON) -> str:
    """A short incident summary from the journal: what failed, what was done, how it ended."""
    trigger = next((h.get("trigger") or {} for h in history if h["kind"] == "start"), {})
    seen = trigger.get("data") or {}
    started = f"since {seen['since']} ({_symptom(seen)})" if "since" in seen else None
    withdrawn = any(
        h["kind"] == "wake" and h.get("woke_by") == "world" and h.get("withdrew") for h in history
    )
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
    parts.append(f"Healthy again since {health.get('since', '?')} ({_symptom(health)}).")
    return " ".join(parts)
