"""Deterministic checks on an artifact, from `[[agents.X.build.checks]]`: they always win over the
model judge. Length limits, required sections or phrases and a regex are pure; a `command` check
runs a validator on the artifact written to a temporary file (exit code + output, redacted)."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from agentd.actions.command import redact
from agentd.config import (
    BuildConfig,
    CommandAction,
    Config,
    HttpAction,
    McpServerRef,
    base_env,
    secret,
)
from agentd.config.build import (
    CheckConfig,
    CommandCheck,
    MaxChars,
    MinChars,
    Phrases,
    Regex,
    Sections,
    search_pattern,
)
from agentd.models import JSON
from agentd.outside.process import run_argv

OUTPUT_CHARS = 600  # of a validator's output kept as evidence
# Of its output read (the tail; the rest is read and dropped): far more than is kept, so that
# redaction sees every secret whole in what is kept.
OUTPUT_READ_BYTES = 64 * 1024
_CHANNEL_SECRETS = ("secret_env", "token_env", "password_env")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s*(.+?)\s*#*\s*$", re.MULTILINE)


def describe(check: CheckConfig) -> str:
    """What a check requires, in words (shown as the requirement's text)."""
    if check.name:
        return check.name
    if isinstance(check, MaxChars):
        return f"At most {check.limit} characters"
    if isinstance(check, MinChars):
        return f"At least {check.limit} characters"
    if isinstance(check, Sections):
        return "Has the sections: " + ", ".join(check.sections)
    if isinstance(check, Phrases):
        return "Contains the phrases: " + ", ".join(repr(p) for p in check.phrases)
    if isinstance(check, Regex):
        return f"{'Never matches' if check.absent else 'Matches'} the pattern {check.pattern!r}"
    return f"Passes the validator {' '.join(check.argv)}"


def requirements(checks: list[CheckConfig]) -> list[JSON]:
    return [{"text": describe(c), "check": i} for i, c in enumerate(checks)]


_FENCE = re.compile(r"^\s{0,3}(```|~~~).*?^\s{0,3}\1", re.MULTILINE | re.DOTALL)


def headings(text: str) -> list[str]:
    """Markdown headings, outside fenced code blocks."""
    return [m.group(1).strip() for m in _HEADING.finditer(_FENCE.sub("", text))]


def _has_section(name: str, have: list[str]) -> bool:
    """A heading names the section: its words in order, as whole words ("Root cause" in
    "The root cause", not in "Rootcauses")."""
    want = re.compile(r"\b" + r"\W+".join(map(re.escape, name.lower().split())) + r"\b")
    return any(want.search(h.lower()) for h in have)


def run_pure(check: CheckConfig, text: str) -> JSON:
    """pass / evidence / fix for every check but `command`."""
    if isinstance(check, MaxChars):
        ok = len(text) <= check.limit
        return _result(ok, f"{len(text)} characters", f"cut it to at most {check.limit} characters")
    if isinstance(check, MinChars):
        ok = len(text) >= check.limit
        return _result(ok, f"{len(text)} characters", f"expand it to at least {check.limit}")
    if isinstance(check, Sections):
        have = headings(text)
        missing = [s for s in check.sections if not _has_section(s, have)]
        return _result(
            not missing,
            f"missing: {', '.join(missing)}" if missing else "all sections present",
            "add headings: " + ", ".join(f"## {s}" for s in missing),
        )
    if isinstance(check, Phrases):
        lower = text.lower()
        missing = [p for p in check.phrases if p.lower() not in lower]
        return _result(
            not missing,
            f"missing: {', '.join(repr(p) for p in missing)}" if missing else "all present",
            "include: " + ", ".join(repr(p) for p in missing),
        )
    assert isinstance(check, Regex)
    try:
        search_pattern(check.pattern).validate_python(text)
        found = True
    except ValidationError:
        found = False
    ok = found != check.absent
    evidence = f"pattern {'found' if found else 'not found'}"
    fix = "remove what matches" if check.absent else f"include text matching {check.pattern!r}"
    return _result(ok, evidence, fix)


async def run_command(
    check: CommandCheck,
    text: str,
    workdir: Path | None,
    *,
    env: Mapping[str, str],
    secrets: Mapping[str, str],
) -> JSON:
    """The validator's verdict on the artifact in a temporary file (removed after).

    It runs as the harness runs a command (`process.run_argv`): with `env` only, in its own
    process group, killed with what it left in the background when it exits (or times out). Its
    output is read through a bounded tail and the `secrets` (NAME → value) are redacted from it
    before it becomes evidence, which is journaled, shown to the operator and sent to the model.
    """
    fd, name = tempfile.mkstemp(prefix="agentd-artifact-", suffix=check.suffix, dir=workdir)
    workdir = workdir or Path(name).parent  # the temporary directory, as documented
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        argv = [a.replace("{file}", name) for a in check.argv]
        done = await run_argv(argv, env=env, cwd=workdir, timeout_s=check.timeout_s,
                              output_bytes=OUTPUT_READ_BYTES, merge_stderr=True,
                              kill_group_at_exit=True)  # fmt: skip
    finally:
        await asyncio.to_thread(Path(name).unlink, missing_ok=True)
    if done.error is not None:
        return redact(_result(False, done.error, "fix the check's argv"), secrets)
    if done.timed_out:
        return _result(False, f"validator timed out after {check.timeout_s:g}s", "")
    # Redacted before the cut, so that no secret is cut into a piece redaction cannot find.
    output = redact({"output": done.stdout}, secrets)["output"].strip()[-OUTPUT_CHARS:]
    return _result(
        done.exit_code == 0,
        f"exit {done.exit_code}" + (f": {output}" if output else ""),
        "make the validator pass" + (f" ({output[:200]})" if output else ""),
    )


def named_secrets(cfg: Config) -> dict[str, str]:
    """NAME → value of every secret the config names and the daemon has, read now: the models'
    keys, the variables actions and sources read, the notification channels' tokens."""
    names: list[str | None] = [getattr(m, "api_key_env", None) for m in cfg.models.values()]
    names += [getattr(ch, f, None) for ch in cfg.notify.values() for f in _CHANNEL_SECRETS]
    for part in [*cfg.actions.values(), *cfg.sources.values()]:
        if isinstance(part, CommandAction):
            names += part.secret_env.values()
        elif isinstance(part, HttpAction | McpServerRef):
            names += part.secret_names()
    return {n: value for n in sorted({n for n in names if n}) if (value := secret(n))}


async def run_all(
    build: BuildConfig, requirements: list[JSON], text: str, cfg: Config
) -> dict[str, JSON]:
    """Each of `build`'s checks' result by requirement id (C1…); validators get the scrubbed
    environment commands get, and `cfg`'s secrets are redacted from what they print."""
    checks, env, secrets = build.checks, base_env(), named_secrets(cfg)
    out: dict[str, JSON] = {}
    for r in requirements:
        if r["source"] != "check":
            continue
        index = int(r["check"])
        if index >= len(checks):  # the config lost a check since the plan: it cannot pass
            out[r["id"]] = _result(False, "this check is no longer in the config", "")
            continue
        check = checks[index]
        if isinstance(check, CommandCheck):
            out[r["id"]] = await run_command(check, text, build.workdir, env=env, secrets=secrets)
        else:
            out[r["id"]] = run_pure(check, text)
    return out


def _result(ok: bool, evidence: str, fix: str) -> JSON:
    return {"pass": ok, "evidence": evidence, "fix": "" if ok else fix}
