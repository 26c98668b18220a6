"""The harness: policy enforced in code on every decided action, before anything executes.

Pure logic over what the engine hands in (the decision, the agent's policy, counters read from the
journal). What the model says about approval is irrelevant: only the verdict computed here counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agentd.actions import CONTROL_TYPES
from agentd.actions.command import fill
from agentd.config import (
    ActionConfig,
    AgentConfig,
    Budget,
    CommandAction,
    HttpAction,
    McpToolAction,
)
from agentd.errors import ActionFailed, ModelOutputInvalid
from agentd.harness import mail
from agentd.harness.menu import Decision, Menu
from agentd.models import JSON, Verdict, canonical_json

# Waiting is not acting: repeating a wait is how a watcher watches, so loops are not counted on
# these action types.
NOT_LOOPING = frozenset({"sleep", "wait_event"})


@dataclass(frozen=True)
class Facts:
    """What the harness needs to know from the journal, gathered by the engine."""

    recent_digests: tuple[str, ...]  # digests of this run's previous valid decisions, oldest first
    acts_last_hour: int  # executions of this action by any run of the agent in the last hour
    denials_in_a_row: int  # this run's consecutive denied proposals before this one


@dataclass(frozen=True)
class Check:
    verdict: Verdict
    rule: str  # which rule decided, shown in the inbox and the timeline
    escalate: bool = False  # deny and ask the operator instead of feeding back to the model


def check(
    decision: Decision,
    agent: AgentConfig,
    facts: Facts,
    action_type: str,
    cfg: ActionConfig | None = None,
) -> Check:
    """The verdict for one decided action. `action_type` is its config type (command, finish…),
    `cfg` its definition (a reply that would be sent is gated further: harness/mail.py)."""
    name = decision.action
    if name not in agent.actions:
        return Check(Verdict.DENY, f"{name} is not on this agent's menu", escalate=True)
    threshold = agent.limits.loop_threshold
    recent = facts.recent_digests[-(threshold - 1) :]
    if (
        action_type not in NOT_LOOPING  # by type: an action *named* sleep may be a command
        and len(recent) == threshold - 1
        and all(d == decision.digest for d in recent)
    ):
        return Check(
            Verdict.DENY,
            f"loop: the same {name} with the same arguments proposed {threshold} times in a row",
            escalate=True,
        )
    default = "allow" if action_type in CONTROL_TYPES else agent.policy.default
    verdict = Verdict(agent.policy.rules.get(name, default))
    rule = f"policy: {name} = {verdict}" if name in agent.policy.rules else f"default = {verdict}"
    verdict, rule = mail.gate(cfg, decision.args, verdict, rule)
    if verdict == Verdict.DENY:
        return Check(verdict, rule, escalate=facts.denials_in_a_row + 1 >= agent.limits.max_denials)
    limit = agent.policy.max_per_hour.get(name)
    if limit is not None and facts.acts_last_hour >= limit:
        return Check(
            Verdict.DENY,
            f"rate limit: {name} ran {facts.acts_last_hour} times in the last hour (max {limit})",
            escalate=facts.denials_in_a_row + 1 >= agent.limits.max_denials,
        )
    return Check(verdict, rule)


def admit(action: str, args: JSON, menu: Menu, acts_last_hour: int, *, approved: bool) -> Check:
    """The harness again, at the moment of execution, against the config in force *now*.

    Called inside the write transaction that journals the action's intent (and consumes its
    approval), with `acts_last_hour` counted in that same transaction — so a rate limit is a
    reservation, not an estimate, and nothing checked or approved under an older config runs
    once the operator tightened it. ALLOW: go ahead. APPROVE: it needs an approval it does not
    have. DENY: refused, with the rule that refused it.
    """
    agent = menu.agent
    if action not in agent.actions:
        return Check(Verdict.DENY, f"{action} is no longer on this agent's menu")
    try:
        valid = menu.validate_args(action, args)
    except ModelOutputInvalid as e:
        return Check(Verdict.DENY, f"arguments no longer valid under the current config: {e}")
    if valid != args:
        return Check(Verdict.DENY, "arguments changed meaning under the current config")
    action_type = menu.config.action(action).type
    default = "allow" if action_type in CONTROL_TYPES else agent.policy.default
    verdict = Verdict(agent.policy.rules.get(action, default))
    verdict, rule = mail.gate(menu.config.action(action), args, verdict, "")
    if verdict == Verdict.DENY:
        return Check(verdict, rule or f"policy now: {action} = deny")
    if verdict == Verdict.APPROVE and not approved:
        return Check(verdict, rule or f"policy now: {action} = approve")
    limit = agent.policy.max_per_hour.get(action)
    if limit is not None and acts_last_hour >= limit:
        return Check(
            Verdict.DENY,
            f"rate limit: {action} ran {acts_last_hour} times in the last hour (max {limit})",
        )
    return Check(Verdict.ALLOW, "admitted")


def resolved(cfg: ActionConfig, action: str, args: JSON) -> JSON:
    """What would execute, as the operator must see it before approving: the command's
    filled-in argv, or the request's method and URL (as configured; secrets stay names)."""
    if isinstance(cfg, CommandAction):
        try:
            return {"argv": [fill(part, args, cfg.params) for part in cfg.argv]}
        except ActionFailed as e:
            return {"error": str(e)}
    if isinstance(cfg, HttpAction):
        label = str(args.get("url"))
        template = cfg.url_templates.get(label, label)  # secrets stay `{secret:NAME}`
        try:
            url = fill(template, args, cfg.params)
        except ActionFailed as e:
            return {"error": str(e)}
        return {"method": args.get("method", cfg.methods[0]), "url": url, "label": label}
    if (mail_shown := mail.shown(cfg, args)) is not None:
        return mail_shown
    if isinstance(cfg, McpToolAction):  # the key argument is filled at execution
        return {"server": cfg.where(), "tool": cfg.tool, "arguments": args.get("arguments", {})}
    return {"action": action}


def config_hash(cfg: ActionConfig) -> str:
    """The identity of what an action *does* (its argv, URLs, env, …): an approval is bound to
    it, so an edit of config.toml after approving never runs a different command."""
    spelled = canonical_json(cfg.model_dump(mode="json"))
    return hashlib.sha256(spelled.encode()).hexdigest()[:16]


def over_budget(budget: Budget, goal: JSON, today: JSON) -> str | None:
    """Why the goal may not spend another decision, or None. `goal` / `today` are spends
    (tokens, usd) over the goal's life and over the current UTC day."""
    limits = [
        (budget.goal_tokens, goal["tokens"], "tokens for this goal"),
        (budget.goal_usd, goal["usd"], "USD for this goal"),
        (budget.day_tokens, today["tokens"], "tokens today"),
        (budget.day_usd, today["usd"], "USD today"),
    ]
    for limit, spent, what in limits:
        if limit is not None and spent >= limit:
            return f"budget spent: {spent:g} of {limit:g} {what}"
    return None
