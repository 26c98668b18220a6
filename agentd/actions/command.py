"""The command action: run a configured argv (never a shell) with `{param}` placeholders filled in.

The child sees a scrubbed environment (the base the daemon passes, the action's `env`, and the
AGENTD_* keys), runs in its own process group, and is killed with that group on timeout or cancel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from agentd.actions import ActionContext
from agentd.config import CommandAction
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.process import DEFAULT_ENV, Completed, run_argv

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(
    template: str,
    values: Mapping[str, object],
    declared: Iterable[str],
    quote: Callable[[str], str] = str,
) -> str:
    """Replace each `{name}` of a declared param with its value, in one pass.

    One pass means a value that itself contains `{other}` is never expanded again. Braces that do
    not name a declared param (`{}` in a find command, a jq filter) are left as written. Raises
    ActionFailed when a declared placeholder has no string value.
    """
    names = set(declared)

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            return match.group(0)
        value = values.get(name)
        if not isinstance(value, str):
            raise ActionFailed(f"placeholder {{{name}}} in {template!r} needs a string argument")
        return quote(value)

    return PLACEHOLDER.sub(one, template)


class CommandExecutor:
    """Runs `cfg.argv`; a non-zero exit is a result with `ok: false`, not an exception."""

    def __init__(
        self, name: str, cfg: CommandAction, base_env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.idempotent = cfg.idempotent
        self.base_env: Mapping[str, str] = DEFAULT_ENV if base_env is None else base_env

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        done = await self._run(self._argv(self.cfg.argv, args), ctx)
        if done.error is not None:
            raise ActionFailed(f"action {self.name!r}: {done.error}")
        return {
            "ok": done.exit_code == 0,
            "exit_code": done.exit_code,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "truncated": done.truncated,
            "timed_out": done.timed_out,
            "duration_ms": done.duration_ms,
            "argv": done.argv,
        }

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """Exit 0 = it happened, 1 = it did not; anything else (or no verify_argv) = unknown."""
        if self.cfg.verify_argv is None:
            return None
        try:
            argv = self._argv(self.cfg.verify_argv, args)
        except ActionFailed:
            return None
        done = await self._run(argv, ctx)
        if done.exit_code == 0:
            return True
        if done.exit_code == 1:
            return False
        return None

    def _argv(self, template: list[str], args: JSON) -> list[str]:
        # The harness validated args already; this re-check keeps the executor safe on its own.
        unknown = sorted(set(args) - set(self.cfg.params))
        if unknown:
            raise ActionFailed(f"action {self.name!r} takes no argument {', '.join(unknown)}")
        return [fill(part, args, self.cfg.params) for part in template]

    async def _run(self, argv: list[str], ctx: ActionContext) -> Completed:
        """One child, for execute or verify alike: same env, cwd and bounds."""
        # Ours last: the config cannot shadow the keys a verify command relies on.
        env = {
            **self.base_env,
            **self.cfg.env,
            "AGENTD_IDEMPOTENCY_KEY": ctx.idempotency_key,
            "AGENTD_RUN_ID": str(ctx.run_id),
            "AGENTD_ACTION": ctx.action,
        }
        return await run_argv(
            argv,
            env=env,
            cwd=self.cfg.cwd,
            timeout_s=self.cfg.timeout_s,
            output_bytes=self.cfg.output_bytes,
        )
