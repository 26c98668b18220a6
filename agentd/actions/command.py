"""The command action: run a configured argv (never a shell) with `{param}` placeholders filled in.

The child sees a scrubbed environment (the base the daemon passes, the action's `env`, its
`secret_env` read at execution time, and the AGENTD_* keys), runs in its own process group, and is
killed with that group on timeout or cancel. Secret values are redacted from what it returns.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from agentd.actions import ActionContext
from agentd.config import CommandAction, secret
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside import process
from agentd.outside.process import DEFAULT_ENV, Completed, run_argv

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
VERIFY_ANSWERS = {"done": True, "not-done": False}  # verify_argv's last line of output


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


def resolve_secrets(
    names: Iterable[str], lookup: Callable[[str], str | None], action: str
) -> dict[str, str]:
    """NAME → value of each named secret, read now; ActionFailed names a missing one, not a value."""
    values = {}
    for name in names:
        value = lookup(name)
        if value is None:
            raise ActionFailed(
                f"action {action!r}: secret ${name} is not set in agentd's environment"
            )
        if not (value.isascii() and value.isprintable()):
            # An error message could carry it in an escaped form that redaction cannot find.
            raise ActionFailed(
                f"action {action!r}: secret ${name} holds control or non-ASCII characters "
                "(a trailing newline?); store it without them"
            )
        values[name] = value
    return values


def redact(result: JSON, secrets: Mapping[str, str]) -> JSON:
    """`result` with every secret's value (or its URL-quoted form) replaced by `[secret:NAME]`.

    Longest first, so a secret that contains another is hidden whole. Results are journaled and
    shown to the model, so this runs before an executor returns one.
    """
    forms = sorted(
        {(v, n) for n, s in secrets.items() for v in (s, urllib.parse.quote(s, safe=""))},
        key=lambda pair: -len(pair[0]),
    )

    def scrub(node: Any) -> Any:
        if isinstance(node, str):
            for value, name in forms:
                node = node.replace(value, f"[secret:{name}]")
            return node
        if isinstance(node, dict):
            return {k: scrub(v) for k, v in node.items()}
        if isinstance(node, list):
            return [scrub(v) for v in node]
        return node

    return dict(scrub(result)) if forms else result


class CommandExecutor:
    """Runs `cfg.argv`; a non-zero exit is a result with `ok: false`, not an exception."""

    def __init__(
        self,
        name: str,
        cfg: CommandAction,
        base_env: Mapping[str, str] | None = None,
        secrets: Callable[[str], str | None] = secret,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.idempotent = cfg.idempotent
        self.base_env: Mapping[str, str] = DEFAULT_ENV if base_env is None else base_env
        self.lookup = secrets  # the daemon's variable NAME → its value (config.secret)

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        argv = self._argv(self.cfg.argv, args)
        secrets = self._secrets()  # a missing one fails here, before anything runs
        done = await self._run(argv, ctx, on_spawn=ctx.on_spawn)
        if done.error is not None:
            failure = redact({"error": done.error}, secrets)["error"]
            raise ActionFailed(f"action {self.name!r}: {failure}")
        return redact(
            {
                "ok": done.exit_code == 0,
                "exit_code": done.exit_code,
                "stdout": done.stdout,
                "stderr": done.stderr,
                "truncated": done.truncated,
                "timed_out": done.timed_out,
                "duration_ms": done.duration_ms,
                "argv": done.argv,
            },
            secrets,
        )

    async def fence(self, ctx: ActionContext, spawned: JSON | None) -> JSON:
        """Kill what an interrupted execution left running (see `process.fence`).

        The key is matched only when it carries the home's `db_id`: a bare `run_id:seq` is the same
        in two homes on one host, and fencing must never kill another home's action.
        """
        return await process.fence(spawned, ctx.idempotency_key if ctx.db_id else "")

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """Exit 0 with a last line `done` = it happened, `not-done` = it did not; anything else
        (another exit code or line, a crash, a timeout, no verify_argv) = unknown.

        A distinctive answer, not an exit code: a verify script that crashes (exit 1 from an
        ImportError) must not pass for "not done" and have a payment sent twice.
        """
        if self.cfg.verify_argv is None:
            return None
        try:
            done = await self._run(self._argv(self.cfg.verify_argv, args), ctx)
        except ActionFailed:
            return None  # a bad argument or a missing secret: it cannot tell
        if done.exit_code != 0 or done.error is not None or done.timed_out:
            return None
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        return VERIFY_ANSWERS.get(lines[-1]) if lines else None

    def _argv(self, template: list[str], args: JSON) -> list[str]:
        # The harness validated args already; this re-check keeps the executor safe on its own.
        unknown = sorted(set(args) - set(self.cfg.params))
        if unknown:
            raise ActionFailed(f"action {self.name!r} takes no argument {', '.join(unknown)}")
        for pname, value in args.items():
            if isinstance(value, str) and (why := self.cfg.params[pname].refusal(value)):
                raise ActionFailed(f"action {self.name!r}: {pname} {why}")
        argv = [fill(part, args, self.cfg.params) for part in template]
        dashing = any(p.allow_leading_dash for p in self.cfg.params.values())
        for part, filled in zip(template, argv, strict=True):
            # `{a}-{b}` with an empty `a` would still start an option: check what is assembled.
            if filled.startswith("-") and not part.startswith("-") and not dashing:
                raise ActionFailed(
                    f"action {self.name!r}: argument {filled[:40]!r} would start with '-' once "
                    "filled in (a command would read it as an option)"
                )
        return argv

    def _secrets(self) -> dict[str, str]:
        """The daemon's variable NAME → value for each `secret_env` source, read now."""
        return resolve_secrets(self.cfg.secret_env.values(), self.lookup, self.name)

    async def _run(
        self,
        argv: list[str],
        ctx: ActionContext,
        on_spawn: Callable[[JSON], Awaitable[None]] | None = None,
    ) -> Completed:
        """One child, for execute or verify alike: same env, cwd and bounds. Only execute passes
        `on_spawn`: a verify child that outlives a crash is fenced by its key alone."""
        secrets = self._secrets()
        # Ours last: the config cannot shadow the keys a verify command relies on.
        env = {
            **self.base_env,
            **self.cfg.env,
            **{child: secrets[source] for child, source in self.cfg.secret_env.items()},
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
            on_spawn=on_spawn,
        )
