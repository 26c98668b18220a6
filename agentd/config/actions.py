"""The action part of the config file: what a command or HTTP action may do, the parameters a
model fills in, and how secrets are named. Validated at the edge like the rest of the config
(`agentd.config` re-exports every name here)."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import SchemaError

from agentd.config.durations import seconds_keys


class Strict(BaseModel):
    """A config table: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _seconds_keys(cls, data: Any) -> Any:  # "5s", "4h": one duration syntax for every *_s key
        return seconds_keys(data)


# `{name}` fills a declared param; `{secret:NAME}` the daemon's variable NAME, at execution only.
PARAM_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SECRET_PLACEHOLDER = re.compile(r"\{secret:([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Param(Strict):
    """A string argument the model fills in; `{name}` in argv or url is replaced by it.

    A value must be one of `choices`, or match `pattern` as a whole (not merely contain a match),
    and may not start with '-' (a command would read it as an option) unless `allow_leading_dash`.
    """

    description: str = ""
    choices: list[str] | None = None
    pattern: str | None = None  # matched against the whole value
    max_length: int = Field(200, ge=1)
    allow_leading_dash: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            usable(pattern, whole_match)
        return pattern

    def refusal(self, value: str) -> str | None:
        """Why `value` may not fill this param, or None when it may. The menu and the executors
        both ask, so a value the model could not have chosen never reaches argv or a URL."""
        if self.choices:
            return None if value in self.choices else f"must be one of {self.choices}"
        if len(value) > self.max_length:
            return f"must be at most {self.max_length} characters"
        if value.startswith("-") and not self.allow_leading_dash:
            return "must not start with '-' (a command would read it as an option)"
        if self.pattern is not None and not _matches(self.pattern, value):
            return f"must match the whole pattern {self.pattern!r}"
        return None


@functools.lru_cache(maxsize=512)
def whole_match(pattern: str) -> TypeAdapter[str]:
    """A validator for values matching `pattern` as a whole, on pydantic's Rust regex engine:
    linear time whatever the pattern and the (model-chosen) value — Python's `re` backtracks,
    and a pattern like `([a-z0-9]+\\.?)+` would let one reply stall the daemon for minutes."""
    return TypeAdapter(
        Annotated[str, StringConstraints(pattern=f"^(?:{pattern})$")],
        config=ConfigDict(regex_engine="rust-regex"),
    )


def usable(pattern: str, compile_: Callable[[str], object]) -> None:
    """ValueError (for a config validator) when the linear-time engine cannot run `pattern`."""
    try:
        compile_(pattern)
    except SchemaError as e:
        detail = str(e).splitlines()[-1].removeprefix("error: ")
        raise ValueError(
            f"not a usable pattern ({detail}); patterns run on a linear-time engine "
            "without look-around or backreferences"
        ) from None


def _matches(pattern: str, value: str) -> bool:
    try:
        whole_match(pattern).validate_python(value)
    except ValidationError:
        return False
    return True


def http_url(value: str | None) -> str | None:
    """A URL agentd can request: http or https, a host, a numeric port. A URL that cannot even
    be requested would otherwise look like an outage at every poll."""
    if value is None:
        return None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or value != value.strip():
        raise ValueError(
            f"{value!r} is not an http(s) URL; write it as http://HOST[:PORT]/PATH, "
            'e.g. "http://127.0.0.1:8080/health"'
        )
    try:
        _ = parts.port  # raises for a port that is not a number in 0-65535
    except ValueError:
        raise ValueError(f"{value!r}: the port is not a number from 0 to 65535") from None
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r}: a URL has no spaces (write them as %20)")
    return value


def program_argv(argv: list[str]) -> list[str]:
    """argv[0] names the program and is fixed by the config. Whether it exists is checked when
    it runs (a source then reports `check_failed`) and by `agentd doctor`, not here: a config is
    often written, or checked in CI, on another machine than the one that runs it."""
    if argv and (not argv[0].strip() or "\0" in argv[0]):
        raise ValueError('argv[0] must name a program, e.g. "systemctl" or "/usr/bin/curl"')
    if argv and PARAM_PLACEHOLDER.search(argv[0]):
        raise ValueError("argv[0] is the program: a {param} may fill later arguments only")
    return argv


class McpServerRef(Strict):
    """How agentd reaches an MCP server: a command it starts and talks to over stdio (`argv`, no
    shell; the child gets the scrubbed base environment, `env`, and `secret_env` read at each
    connection), or a URL it talks streamable HTTP to, with a bearer token read from the
    variable (or systemd credential) `token_env` names. One connection per look or call."""

    argv: list[str] | None = None
    url: str | None = None
    token_env: str | None = None  # the NAME of the variable holding the token, never the token
    env: dict[str, str] = {}
    secret_env: dict[str, str] = {}  # child variable → the daemon's variable it is copied from
    cwd: Path | None = None  # the command's working directory (relative to the config file)
    timeout_s: float = Field(10.0, gt=0)  # the whole connection: start, handshake, calls

    @field_validator("argv")
    @classmethod
    def _program_is_fixed(cls, argv: list[str] | None) -> list[str] | None:
        if argv is not None and not argv:
            raise ValueError('argv must name the server program, e.g. ["python", "server.py"]')
        return None if argv is None else program_argv(argv)

    @field_validator("url")
    @classmethod
    def _url_is_usable(cls, url: str | None) -> str | None:
        http_url(url)
        if url is not None and urllib.parse.urlsplit(url).username is not None:
            raise ValueError(
                "the URL holds credentials; remove them and name the token's variable "
                'in token_env = "..."'
            )
        return url

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServerRef:
        if (self.argv is None) == (self.url is None):
            raise ValueError(
                'give exactly one of argv = ["program", ...] (a stdio server agentd starts) '
                'or url = "https://HOST/mcp" (a streamable HTTP server)'
            )
        if self.url is not None and (self.env or self.secret_env or self.cwd):
            raise ValueError("env, secret_env and cwd are for a stdio server (argv), not a url")
        if self.argv is not None and self.token_env is not None:
            raise ValueError(
                "token_env is sent as a bearer token to a url; a stdio server gets "
                'its secrets through secret_env = { CHILD_VAR = "NAME" }'
            )
        names = [self.token_env] if self.token_env is not None else []
        for child, source in [*self.secret_env.items(), *(("token_env", n) for n in names)]:
            if not (_ENV_NAME.fullmatch(child) and _ENV_NAME.fullmatch(source)):
                raise ValueError(
                    f"{child} = {source!r}: name a variable (letters, digits and _), never "
                    "the secret itself"
                )
        return self

    def secret_names(self) -> list[str]:
        """The daemon's variables a connection reads."""
        return sorted({*self.secret_env.values(), *([self.token_env] if self.token_env else [])})

    def where(self) -> str:
        """The server as an operator recognises it (the URL, or the command line)."""
        return self.url if self.url is not None else " ".join(self.argv or [])


def schema_mismatch(schema: dict[str, Any], instance: Any) -> str | None:
    """Why `instance` does not validate against the JSON Schema `schema` (the most relevant
    error, with where), or None. Used for an mcp_tool's arguments, at decision and execution."""
    # The MCP SDK's own dependency (no type stubs); loaded only where mcp_tool is used.
    import jsonschema  # type: ignore[import-untyped]

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    except jsonschema.SchemaError as e:
        return f"the schema itself is invalid ({e.message[:200]})"
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message[:300]}"


class _ActionBase(Strict):
    description: str = ""
    idempotent: bool = False
    params: dict[str, Param] = {}


class CommandAction(_ActionBase):
    type: Literal["command"]
    argv: list[str] = Field(min_length=1)
    timeout_s: float = Field(60.0, gt=0)
    output_bytes: int = Field(4000, ge=0)
    cwd: Path | None = None
    env: dict[str, str] = {}
    # Secrets by name: child variable → the daemon's variable it is copied from at execution time,
    # e.g. { API_TOKEN = "PAYMENTS_TOKEN" }. Their values are redacted from results.
    secret_env: dict[str, str] = {}
    # Tells whether a started-but-unrecorded execution happened. It must exit 0 and print, as its
    # last non-empty line, `done` (it happened) or `not-done` (it did not); anything else (another
    # exit code, a crash, other output, a timeout) is unknown and the operator is asked.
    # AGENTD_IDEMPOTENCY_KEY is set for both the action and its verify command.
    verify_argv: list[str] | None = None

    @field_validator("params")
    @classmethod
    def _params_are_constrained(cls, params: dict[str, Param]) -> dict[str, Param]:
        for name, p in params.items():
            if not p.choices and p.pattern is None:
                raise ValueError(
                    f"param {name!r} would reach argv unconstrained; give it "
                    f'choices = [...] or pattern = "..." (matched against the whole value)'
                )
        return params

    @field_validator("argv", "verify_argv", "env")
    @classmethod
    def _no_secret_placeholders(cls, value: Any) -> Any:
        parts = value.values() if isinstance(value, dict) else value or []
        if any(SECRET_PLACEHOLDER.search(part) for part in parts):
            raise ValueError(
                "{secret:NAME} is not filled in argv or env (argv is journaled); "
                'pass the secret as a variable with secret_env = { CHILD_VAR = "NAME" }'
            )
        return value

    @field_validator("argv", "verify_argv")
    @classmethod
    def _program_is_fixed(cls, argv: list[str] | None) -> list[str] | None:
        return None if argv is None else program_argv(argv)

    @model_validator(mode="after")
    def _secret_env_names(self) -> CommandAction:
        for child, source in self.secret_env.items():
            if not (_ENV_NAME.fullmatch(child) and _ENV_NAME.fullmatch(source)):
                raise ValueError(f"secret_env: {child!r} = {source!r} must both be variable names")
            if child.startswith("AGENTD_") or child in self.env:
                raise ValueError(f"secret_env: {child!r} is already set (by env or by agentd)")
        return self


class HttpAction(_ActionBase):
    type: Literal["http"]
    # The allowlist: URL templates, or a table label → template. The model sees and picks labels
    # (a list's are its hosts: see `labels`). `{param}` fills a declared param in the path or
    # query; `{secret:NAME}` the daemon's variable NAME, at execution time only.
    urls: list[str] | dict[str, str] = Field(min_length=1)
    headers: dict[str, str] = {}  # sent with every request; values may hold {secret:NAME}
    methods: list[Literal["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"]] = ["POST"]
    timeout_s: float = Field(10.0, gt=0)
    body_excerpt_bytes: int = Field(1000, ge=0)

    @property
    def labels(self) -> dict[str, str]:
        """Label → URL template, as the model, the journal and approvals name each URL: a
        table's keys; a list's templates by their host (`api.example:8443`, numbered `#1`, `#2`
        when several share one) — never the URL, whose path or query may hold a token."""
        if isinstance(self.urls, dict):
            return dict(self.urls)
        hosts = [urllib.parse.urlsplit(t).netloc.rpartition("@")[2] for t in self.urls]
        numbered = [f"{h} #{hosts[: i + 1].count(h)}" for i, h in enumerate(hosts)]
        return {
            host if hosts.count(host) == 1 else number: template
            for host, number, template in zip(hosts, numbered, self.urls, strict=True)
        }

    @property
    def url_templates(self) -> dict[str, str]:
        """Label → URL template (`labels`). A list's templates also stand for themselves, as
        they did before labels hid them: a decision or approval journaled then still runs."""
        if isinstance(self.urls, dict):
            return dict(self.urls)
        return {**self.labels, **{u: u for u in self.urls}}

    def secret_names(self) -> list[str]:
        """The daemon's variables this action reads, from its URLs and headers."""
        texts = [*self.labels.values(), *self.headers.values()]
        return sorted({name for t in texts for name in SECRET_PLACEHOLDER.findall(t)})

    @model_validator(mode="after")
    def _templates_are_fixed_where_it_matters(self) -> HttpAction:
        written = dict(self.urls) if isinstance(self.urls, dict) else {u: u for u in self.urls}
        for label, template in written.items():
            parts = urllib.parse.urlsplit(template)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"url {label!r} must start with http:// or https:// and a host")
            if "{" in parts.netloc:
                raise ValueError(f"url {label!r}: placeholders may fill the path and query only")
            unknown = set(PARAM_PLACEHOLDER.findall(template)) - set(self.params)
            if unknown:
                raise ValueError(
                    f"url {label!r} names {', '.join(sorted(unknown))}, not a declared param"
                )
        hosts = {urllib.parse.urlsplit(t)[:2] for t in written.values()}
        if len(hosts) > 1 and any(SECRET_PLACEHOLDER.search(v) for v in self.headers.values()):
            raise ValueError(
                "headers carry a secret to every url, and these urls name several hosts; "
                "split the action into one per host"
            )
        return self


class McpToolAction(_ActionBase, McpServerRef):
    """Call one tool of an MCP server. The model gives `arguments`, a JSON object: checked at
    decision time against `input_schema` when the config declares one, and always at execution
    against the tool's own input schema (fetched from the server then). `idempotency_arg` names
    the tool argument agentd fills with the execution's idempotency key (the model cannot set
    it); declare `idempotent = true` only when the server dedupes on that key, so a call a crash
    interrupted is re-sent with the same key instead of asking the operator."""

    type: Literal["mcp_tool"]
    tool: str = Field(min_length=1)
    idempotency_arg: str | None = None
    input_schema: dict[str, Any] | None = None  # JSON Schema of `arguments` shown to the model
    output_bytes: int = Field(4000, ge=0)  # of the tool's result kept in the journal
    timeout_s: float = Field(30.0, gt=0)

    @field_validator("input_schema")
    @classmethod
    def _is_an_object_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None:
            return None
        import jsonschema  # as in schema_mismatch (whose import mypy checks)

        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as e:
            raise ValueError(f"input_schema is not a JSON Schema: {e.message}") from None
        if schema.get("type") != "object":
            raise ValueError('input_schema describes the arguments object: type = "object"')
        return schema

    @model_validator(mode="after")
    def _fits_the_tool(self) -> McpToolAction:
        if self.params:
            raise ValueError("an mcp_tool takes `arguments` (see input_schema), not params")
        props = (self.input_schema or {}).get("properties", {})
        if self.idempotency_arg is not None and self.idempotency_arg in props:
            raise ValueError(
                f"input_schema offers {self.idempotency_arg!r} to the model, but agentd fills "
                "it (idempotency_arg): remove it from input_schema"
            )
        return self


class BuiltinAction(_ActionBase):
    type: Literal["finish", "ask", "notify", "sleep", "wait_event", "build"]
    max_sleep_s: float = Field(7 * 86400, gt=0)
    events: list[str] | None = None  # wait_event: names the model may wait for (None = any)


from agentd.config.mail import (  # noqa: E402 (mail's actions build on Strict above)
    MailFlagAction,
    MailMoveAction,
    MailReplyAction,
)

ActionConfig = Annotated[
    CommandAction
    | HttpAction
    | McpToolAction
    | BuiltinAction
    | MailMoveAction
    | MailFlagAction
    | MailReplyAction,
    Field(discriminator="type"),
]
