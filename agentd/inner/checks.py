"""Deterministic checks on an artifact, from `[[agents.X.build.checks]]`: they always win over the
model judge. Length limits, required sections or phrases and a regex are pure; a `command` check
runs a validator on the artifact written to a temporary file (exit code + output)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import tempfile
from pathlib import Path

from pydantic import ValidationError

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

OUTPUT_CHARS = 600  # of a validator's output kept as evidence
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


async def run_command(check: CommandCheck, text: str, workdir: Path | None) -> JSON:
    """The validator's verdict on the artifact in a temporary file (removed after)."""
    fd, name = tempfile.mkstemp(prefix="agentd-artifact-", suffix=check.suffix, dir=workdir)
    workdir = workdir or Path(name).parent  # the temporary directory, as documented
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        argv = [a.replace("{file}", name) for a in check.argv]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL, cwd=workdir, start_new_session=True,
            )  # fmt: skip
        except OSError as e:
            return _result(False, f"validator could not start: {e}", "fix the check's argv")
        try:
            async with asyncio.timeout(check.timeout_s):
                out, _ = await proc.communicate()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            await proc.wait()
            return _result(False, f"validator timed out after {check.timeout_s:g}s", "")
        output = out.decode("utf-8", "replace").strip()[-OUTPUT_CHARS:]
        return _result(
            proc.returncode == 0,
            f"exit {proc.returncode}" + (f": {output}" if output else ""),
            "make the validator pass" + (f" ({output[:200]})" if output else ""),
        )
    finally:
        await asyncio.to_thread(Path(name).unlink, missing_ok=True)


async def run_all(
    checks: list[CheckConfig], requirements: list[JSON], text: str, workdir: Path | None
) -> dict[str, JSON]:
    """Each configured check's result by requirement id (C1…)."""
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
            out[r["id"]] = await run_command(check, text, workdir)
        else:
            out[r["id"]] = run_pure(check, text)
    return out


def _result(ok: bool, evidence: str, fix: str) -> JSON:
    return {"pass": ok, "evidence": evidence, "fix": "" if ok else fix}
