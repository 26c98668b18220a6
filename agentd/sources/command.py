"""The command source: run a configured argv (no shell) and report its exit code and output tail.

A command that runs over its timeout or exits non-zero is an observation (`ok: false`), never an
exception. One that cannot start (no such program, not executable) — or that a shell reports it
could not run (exit 126 "cannot execute", 127 "command not found") — is `check_failed`: the
probe is broken, which says nothing about what it probes. The child's environment is the
scrubbed base the daemon passes, nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentd.config import CommandSource
from agentd.models import JSON
from agentd.outside.process import DEFAULT_ENV, run_argv

# The exit codes by which a shell says it could not run the command at all (POSIX).
CANNOT_RUN = {126: "a program it runs is not executable", 127: "a program it runs was not found"}


class CommandSourceReader:
    def __init__(
        self, name: str, cfg: CommandSource, base_env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.base_env: Mapping[str, str] = DEFAULT_ENV if base_env is None else base_env

    async def observe(self) -> JSON:
        done = await run_argv(
            self.cfg.argv,
            env=self.base_env,
            cwd=None,
            timeout_s=self.cfg.timeout_s,
            output_bytes=self.cfg.output_bytes,
        )
        if done.error is not None:
            return {"ok": False, "check_failed": True, "error": done.error}
        if done.timed_out:
            return {"ok": False, "error": f"timed out after {self.cfg.timeout_s:g}s"}
        if done.exit_code in CANNOT_RUN:
            error = f"exit {done.exit_code}: {CANNOT_RUN[done.exit_code]}"
            return {"ok": False, "check_failed": True, "error": error, "stderr": done.stderr}
        return {
            "exit_code": done.exit_code,
            "ok": done.exit_code == 0,
            "output": done.stdout,
            "stderr": done.stderr,
        }
