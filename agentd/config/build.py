"""The inner loop's part of the config file: `[agents.X.build]` — which models generate and judge,
the bounds, and the deterministic checks that always win over the judge. Validated at the edge like
the rest of the config (`agentd.config` re-exports the names here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, field_validator, model_validator

from agentd.config.actions import Strict, usable, whole_match


class _CheckBase(Strict):
    name: str | None = None  # shown beside its verdict; default: a description of the check


class MaxChars(_CheckBase):
    """The artifact is at most `limit` characters long."""

    kind: Literal["max_chars"]
    limit: int = Field(ge=1)


class MinChars(_CheckBase):
    """The artifact is at least `limit` characters long."""

    kind: Literal["min_chars"]
    limit: int = Field(ge=1)


class Sections(_CheckBase):
    """Each named section is present as a heading (a line starting with `#`, case-insensitive)."""

    kind: Literal["sections"]
    sections: list[str] = Field(min_length=1)


class Phrases(_CheckBase):
    """Each phrase occurs in the artifact (case-insensitive)."""

    kind: Literal["phrases"]
    phrases: list[str] = Field(min_length=1)


class Regex(_CheckBase):
    """A pattern that must match somewhere in the artifact (or, with `absent`, nowhere).
    Runs on pydantic's linear-time engine, like parameter patterns."""

    kind: Literal["regex"]
    pattern: str
    absent: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        usable(value, search_pattern)
        return value


def search_pattern(pattern: str) -> TypeAdapter[str]:
    """A validator that passes text containing a match of `pattern` anywhere (any line)."""
    return whole_match(f"(?sm).*?(?:{pattern}).*")  # ^ and $ match at each line


class CommandCheck(_CheckBase):
    """A command that validates the artifact written to a temporary file: `{file}` in argv is
    its path. Exit 0 passes; otherwise its output (cut) is the evidence."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1)
    timeout_s: float = Field(30.0, gt=0, le=600)
    suffix: str = ".txt"  # the temporary file's extension (some validators need one)

    @field_validator("argv")
    @classmethod
    def _has_file(cls, value: list[str]) -> list[str]:
        if not any("{file}" in a for a in value):
            raise ValueError("a command check needs {file} in argv (the artifact's path)")
        return value


CheckConfig = Annotated[
    MaxChars | MinChars | Sections | Phrases | Regex | CommandCheck, Field(discriminator="kind")
]


class BuildConfig(Strict):
    """How this agent's goals build artifacts: generate → judge → revise (`agentd build`)."""

    model: str | None = None  # the generator; default: the agent's model
    judge_model: str | None = None  # the judge (may be stronger); default: the generator's
    max_revisions: int = Field(3, ge=0, le=20)  # revisions after the first draft, then ask
    max_artifact_chars: int = Field(20_000, ge=100, le=60_000)  # a longer draft is cut
    plan: bool = True  # a model call before the first draft: extract requirements, maybe ask
    max_invalid: int = Field(3, ge=1, le=10)  # invalid replies in a row before the run asks
    # Output tokens a draft or a verdict may use (a model's own max_tokens, if higher, wins):
    # a decision fits in 1024, a résumé does not.
    max_tokens: int = Field(8192, ge=256, le=128_000)
    checks: list[CheckConfig] = Field(default_factory=list)
    workdir: Path | None = None  # where command checks run; default: a temporary directory
    # Delivering the passed version is an ordinary action on the agent's menu, checked by the
    # harness like any (policy, approvals, limits): its `deliver_param` gets the artifact's text.
    deliver: str | None = None
    deliver_param: str = "text"

    @model_validator(mode="after")
    def _named_once(self) -> BuildConfig:
        names = [c.name for c in self.checks if c.name]
        if len(names) != len(set(names)):
            raise ValueError("build.checks: two checks have the same name")
        return self
