"""`agentd doctor`: check a home — config, database, daemon, models and their API keys.

Pure-ish: it reads files and opens the database, changes nothing, and returns a Report that the CLI
renders. Secrets are checked for presence only; their values never reach a message.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from agentd import config, llm
from agentd.config import Config, ModelConfig, OtherModel, Paths, ScriptedModel
from agentd.db import schema
from agentd.db.store import SyncStore
from agentd.errors import AgentdError
from agentd.llm import SUMMARY_SCHEMA, ModelRequest
from agentd.llm.scripted import load_replies
from agentd.render import Check


@dataclass(frozen=True)
class Report:
    """Every finding for one home; healthy when each required check passed."""

    home: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "home": self.home, "checks": [c._asdict() for c in self.checks]}


def examine(paths: Paths, daemon_pid: int | None) -> Report:
    """Check the home at `paths`; `daemon_pid` is who holds its lock (-1: someone, pid unknown)."""
    cfg: Config | None = None
    try:
        cfg = config.load(paths.config)
        counts = f"{len(cfg.agents)} agent(s), {len(cfg.models)} model(s)"
        checks = [Check("config", True, f"{paths.config}: valid; {counts}")]
    except AgentdError as e:
        checks = [Check("config", False, str(e))]
    checks += check_database(paths)
    checks.append(check_daemon(daemon_pid))
    if cfg is not None:
        models = [check_model(n, m) for n, m in cfg.models.items()]
        checks += models or [Check("models", False, "no [models.NAME] configured")]
    return Report(str(paths.home), checks)


def check_database(paths: Paths) -> list[Check]:
    if not paths.db.exists():
        return [Check("database", False, f"{paths.db}: missing; run `agentd init`")]
    try:
        store = SyncStore(paths.db, migrate_schema=False)
        try:
            # BEGIN IMMEDIATE takes the write lock (or fails); the empty transaction changes nothing.
            have = store.write(schema.version)
        finally:
            store.close()
    except AgentdError as e:
        return [Check("database", False, str(e))]
    want = len(schema.MIGRATIONS)
    advice = (
        "current" if have == want else "run any command to migrate" if have < want else "upgrade"
    )
    migrated = Check("schema", have == want, f"version {have} of {want} ({advice})")
    return [Check("database", True, f"{paths.db}: writable"), migrated]


def check_daemon(pid: int | None) -> Check:
    """Information only: a stopped daemon is a normal state for a home, not a failure."""
    if pid is None:
        return Check("daemon", False, "not running; start it with `agentd serve`", False)
    return Check("daemon", True, f"running (pid {pid if pid > 0 else 'unknown'})", False)


def check_model(name: str, model: ModelConfig) -> Check:
    label = f"model {name}"
    if isinstance(model, ScriptedModel):
        try:
            count = len(load_replies(model.replies))
        except AgentdError as e:
            return Check(label, False, str(e))
        return Check(label, True, f"scripted; replies {model.replies} ({count})")
    if not isinstance(model, OtherModel):  # an embedded decider (runbook): nothing to reach
        return Check(label, True, f"{model.provider}: built in; needs no API key")
    what, env = f"{model.provider} {model.model}", model.api_key_env
    if env is None:
        return Check(label, True, f"{what}: no api_key_env configured")
    if config.secret(env) is None:  # the value itself is never shown
        return Check(label, False, f"{what}: ${env} is not set in this environment")
    return Check(label, True, f"{what}: ${env} is set")


async def ping(cfg: Config, timeout_s: float = 30.0) -> list[Check]:
    """Ask each configured model for a tiny reply (a summary request: it costs a few tokens and
    consumes no scripted decision). Reports latency, or the provider's error without secrets."""
    checks = []
    for name, model_cfg in cfg.models.items():
        request = ModelRequest(
            run_id=0, goal_id=0, decision_no=0, attempt=1, purpose="summarize",
            system='Reply with JSON {"summary": "pong"}.', prompt="ping", schema=SUMMARY_SCHEMA,
        )  # fmt: skip
        started = time.monotonic()
        try:
            model = llm.build(name, model_cfg)
            async with asyncio.timeout(timeout_s):
                reply = await model.complete(request)
        except TimeoutError:
            checks.append(Check(f"ping {name}", False, f"no answer within {timeout_s:g}s"))
            continue
        except AgentdError as e:
            checks.append(Check(f"ping {name}", False, str(e)))
            continue
        ms = (time.monotonic() - started) * 1000
        checks.append(Check(f"ping {name}", True, f"{reply.model} answered in {ms:.0f} ms"))
    return checks
