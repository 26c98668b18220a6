"""The tools agentd serves over MCP: the operator's everyday operations, through the operator
layer the CLI uses (agentd/operator/goals.py, inbox.py), so they validate and refuse as the CLI
does. An expected error is a tool error carrying the CLI's message; asking for what already
holds is a result with a note.

Approvals are human-only. No tool here approves or denies; `register_approve` adds one (listed
and callable only while `[mcp] approvals = true`) that asks the person at the client through MCP
elicitation, and records the decision as theirs. A client without elicitation is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol, TypeVar

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from agentd.config import Config, Paths
from agentd.errors import AgentdError, Refused, Unchanged
from agentd.models import JSON, InboxKind, InboxStatus
from agentd.operator import goals, inbox, runs
from agentd.operator import schedules as plan
from agentd.operator.home import HomeStore
from agentd.operator.parse import pick_agent
from agentd.text import compact, jsonable, screen

T = TypeVar("T")
# What agentd knows: the client answered its elicitation (a person, if the client shows it to one).
VIA_ELICITATION = "answered through the MCP client's elicitation"
MEMORY_SOURCE = "mcp"  # goal_memory.source of context a client added
APPROVALS_OFF = (
    "approving over MCP is off ([mcp] approvals = false); approve or deny with `agentd inbox "
    "approve ID` / `agentd inbox deny ID`, or set approvals = true and run `agentd reload`"
)


class Home(Protocol):
    """What the tools need of the server: the home, its config as it is now (read at each call:
    a reload applies), and its store on a worker thread."""

    paths: Paths

    @property
    def cfg(self) -> Config: ...

    @property
    def store(self) -> HomeStore: ...

    async def db(self, fn: Callable[..., T], *args: Any) -> T: ...


class ApprovalDecision(BaseModel):
    """What the person at the MCP client is asked about an approval item."""

    decision: Literal["approve", "deny"] = Field(description="approve or deny the exact action")
    reason: str = Field("", description="optional; recorded and told to the run")


async def _call(home: Home, fn: Callable[..., T], *args: Any) -> T | JSON:
    """`fn(*args)` on the store's thread; Unchanged is a note, any other AgentdError a tool error."""
    try:
        return await home.db(fn, *args)
    except Unchanged as e:
        return {"changed": False, "note": str(e)}
    except AgentdError as e:
        raise ToolError(str(e)) from None


def _usage(store: HomeStore, days: int) -> list[JSON]:
    """`agentd usage --days` on the store's thread: the days are the home's (a simulated
    clock's under `serve --clock-speed`), as the model calls were stamped."""
    return runs.usage(store, plan.home_now(store) - days * 86400)


def _item(value: Any) -> JSON:
    return value if isinstance(value, dict) else dict(jsonable(value))


def register(mcp: MCPServer[Any], home: Home) -> None:
    """The plain tools: add a goal, add to its memory, answer, accept or dismiss, start, usage."""

    @mcp.tool()
    async def add_goal(
        title: str,
        why: str,
        criteria: list[str] | None = None,
        deadline: str | None = None,
        agent: str | None = None,
    ) -> JSON:
        """Add a goal, as `agentd goal add`: what you want done (a line), why it matters, success
        criteria, an optional deadline (ISO 8601, or a delay like 3d) and agent (default: the
        only one configured). Returns the goal; start it with start_run."""

        def work() -> Any:
            name = pick_agent(home.cfg, agent, home.paths.config)
            now = datetime.fromtimestamp(plan.home_now(home.store), UTC)
            when = goals.parse_deadline(deadline, now) if deadline is not None else None
            return goals.add(home.store, title=title, why=why, agent=name,
                             criteria=criteria or [], deadline=when)  # fmt: skip

        return _item(await _call(home, work))

    @mcp.tool()
    async def add_context(goal_id: int, text: str) -> JSON:
        """Tell a goal something it should know from now on ("I moved to Berlin", "budget is
        500 €"). It joins the goal's memory as the operator's word, which every check-in and
        run of the goal reads."""

        def work() -> JSON:
            entry_id = goals.add_context(home.store, goal_id, text, MEMORY_SOURCE)
            return {"goal_id": goal_id, "entry_id": entry_id, "kind": "known"}

        return _item(await _call(home, work))

    @mcp.tool()
    async def answer_question(item_id: int, text: str) -> JSON:
        """Answer an open question in the inbox (agentd://inbox); the waiting run wakes with it."""
        return _item(await _call(home, inbox.answer, home.store, item_id, text))

    @mcp.tool()
    async def accept_nudge(item_id: int) -> JSON:
        """Accept a check-in's nudge: its suggested action runs as a run of the goal, through
        the harness like any action (policy and approvals apply)."""
        now = await home.db(plan.home_now, home.store)
        return _item(await _call(home, inbox.accept, home.store, home.cfg, item_id, now))

    @mcp.tool()
    async def dismiss_nudge(item_id: int, reason: str = "") -> JSON:
        """Dismiss a notice or nudge; a dismissed nudge makes the goal check in less often, and
        its reason joins the goal's memory."""
        now = await home.db(plan.home_now, home.store)
        return _item(await _call(home, inbox.dismiss, home.store, item_id, reason, now))

    @mcp.tool()
    async def start_run(goal_id: int) -> JSON:
        """Start a run of an active goal now (a running daemon picks it up within a second)."""
        return _item(await _call(home, goals.start_run, home.store, goal_id))

    @mcp.tool()
    async def check_in_now(goal_id: int) -> JSON:
        """Make a goal check in now rather than at its next planned look: a running daemon
        picks it up within a second (inside the goal's quiet hours: when they end)."""
        return _item(await _call(home, goals.check_in_now, home.store, home.cfg, goal_id))

    @mcp.tool()
    async def usage(days: int = 30) -> list[JSON]:
        """Model calls, tokens and cost by goal, model and UTC day, as `agentd usage --json`."""
        if not 1 <= days <= 36500:
            raise ToolError(f"days is {days}; give 1 or more")
        return await home.db(_usage, home.store, days)


# ── approvals: the person at the client, through elicitation ──────────────────────────────────


def register_approve(mcp: MCPServer[Any], home: Home) -> None:
    """The `approve` tool: the decision is elicited from the client's user, never taken from
    the tool's arguments, and recorded as theirs."""

    def open_approval(item_id: int) -> Any:
        item = inbox.get_item(home.store, item_id)
        if item.kind != InboxKind.APPROVAL:
            raise Refused(f"inbox item {item_id} is a {item.kind}, not an approval")
        if item.status != InboxStatus.OPEN:
            raise Refused(f"inbox item {item_id} is already {item.status}")
        return item

    async def ask(item_id: int, ctx: Context) -> Elicit[ApprovalDecision]:
        caps = ctx.client_capabilities
        elicitation = caps.elicitation if caps is not None else None
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            raise ToolError(
                "approving needs the person at the client: this client does not support MCP "
                f"elicitation; use `agentd inbox approve {item_id}` or `agentd inbox deny {item_id}`"
            )
        try:
            item = await home.db(open_approval, item_id)
        except AgentdError as e:
            raise ToolError(str(e)) from None
        what = f"{item.action} {compact(item.args or {})}"
        # A run's model wrote the title and body: shown escaped, as on the terminal.
        return Elicit(
            screen(
                f"agentd asks you (not the assistant) to approve or deny inbox item {item_id}: "
                f"{item.title}\nAction: {what}\nRule: {item.rule}\n{item.body}"
            ),
            ApprovalDecision,
        )

    async def approve(item_id: int, decision: Any) -> JSON:
        """Ask the person at this client to approve or deny an approval item (agentd://inbox).
        The answer comes from them through elicitation — this tool cannot decide on its own."""
        if not isinstance(decision, AcceptedElicitation):
            raise ToolError(
                f"the person did not decide ({decision.action}); inbox item {item_id} stays open"
            )
        if not home.cfg.mcp.approvals:  # turned off while the person was deciding
            raise ToolError(APPROVALS_OFF)
        said = decision.data
        note = f"{said.reason} ({VIA_ELICITATION})" if said.reason.strip() else VIA_ELICITATION
        if said.decision == "approve":
            result = await _call(home, inbox.approve, home.store, home.cfg, item_id, None, note)
        else:
            result = await _call(home, inbox.deny, home.store, item_id, note)
        return _item(result)

    # The decision is filled by `ask` (elicitation), never from the call's arguments. Set here,
    # not written in the signature: postponed annotations could not see the local `ask`.
    approve.__annotations__["decision"] = Annotated[
        ElicitationResult[ApprovalDecision], Resolve(ask)
    ]
    mcp.add_tool(approve)
