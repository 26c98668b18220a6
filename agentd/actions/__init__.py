"""Actions that touch the outside world: the Executor protocol and the registry of built-in types.
May import config/, outside/ and the ground; never db/, llm/ or a loop (the loops hand them what they need).

Control actions (finish, ask, notify, sleep, wait_event, build) change the run or the inbox and are
carried out by the engine; the executors here (command, http, mcp_tool) reach outside systems and
know nothing of the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from agentd.config import ActionConfig, CommandAction, Config, HttpAction, McpToolAction
from agentd.config.mail import ImapSource, MailActionBase, MailReplyAction
from agentd.config.notify import EmailNotify
from agentd.models import JSON

CONTROL_TYPES = frozenset({"finish", "ask", "notify", "sleep", "wait_event", "build"})


@dataclass(frozen=True)
class ActionContext:
    """What an execution knows about itself; the key is stable across crashes.

    The key is `DBID:run_id:seq`: `db_id` is a random id kept in the database's `meta` table, so
    two homes (staging and prod, or a re-initialised home) never send the same key to one API.
    `on_spawn` is called with a small JSON record of the process group a command started (its
    pgid and start time), so recovery can fence it; executors without processes never call it.
    """

    run_id: int
    goal_id: int
    seq: int
    action: str
    db_id: str = ""
    on_spawn: Callable[[JSON], Awaitable[None]] | None = None
    traceparent: str | None = None  # W3C trace context of the action's span ([tracing] on)

    @property
    def idempotency_key(self) -> str:
        return (
            f"{self.db_id}:{self.run_id}:{self.seq}" if self.db_id else f"{self.run_id}:{self.seq}"
        )


class Executor(Protocol):
    """One configured action of an outside kind."""

    idempotent: bool

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        """Carry the action out; the returned dict (small, JSON-able) is journaled as its result.

        A failure the run should see (non-zero exit, HTTP 500) is a result with `"ok": false`;
        raise ActionFailed only when the action could not be attempted at all.
        """
        ...

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """After a crash: did the execution keyed `ctx.idempotency_key` happen? None = unknown."""
        ...

    async def fence(self, ctx: ActionContext, spawned: JSON | None) -> JSON:
        """After a crash, before `verify` or a re-run: make sure nothing of the interrupted
        execution is still at work, so it cannot finish the side effect behind recovery's back.

        `spawned` is what `ctx.on_spawn` recorded (None if the crash came first). Returns a small
        report for the journal: `{"killed": [pids], "survivors": [pids]}`; survivors mean the
        outcome may still change, so recovery should not trust a "not done" verdict.
        """
        ...


def build(
    name: str, cfg: ActionConfig, base_env: Mapping[str, str], whole: Config | None = None
) -> Executor | None:
    """The executor for an outside action, or None for a control action the engine handles.

    `base_env` is the scrubbed environment commands start from (see `config.base_env`); `whole`
    is the config the action is in (a mail action's mailbox and SMTP relay are defined there).
    """
    if isinstance(cfg, CommandAction):
        from agentd.actions.command import CommandExecutor

        return CommandExecutor(name, cfg, base_env=base_env)
    if isinstance(cfg, HttpAction):
        from agentd.actions.http import HttpExecutor

        return HttpExecutor(name, cfg)
    if isinstance(cfg, McpToolAction):
        from agentd.actions.mcp_tool import McpToolExecutor

        return McpToolExecutor(name, cfg, base_env=base_env)
    if isinstance(cfg, MailActionBase):
        from agentd.actions.mail import MailExecutor

        if whole is None:
            raise TypeError(f"the mail action {name} needs the whole config")
        relay = (
            whole.notify.get(cfg.smtp) if isinstance(cfg, MailReplyAction) and cfg.smtp else None
        )
        mailbox = whole.sources[cfg.source]
        assert isinstance(mailbox, ImapSource) and (relay is None or isinstance(relay, EmailNotify))
        return MailExecutor(name, cfg, mailbox, relay)
    return None
