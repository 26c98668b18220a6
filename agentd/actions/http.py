"""The http action: one request to a URL template on the action's allowlist, with an Idempotency-Key.

The model picks a URL by its label (a list's labels are its templates) and gives the params; here
each `{param}` is filled URL-quoted and `{secret:NAME}` from the daemon's environment. A value that
could move the request ('.', '..', a '/' or '\\', even percent-encoded) is refused, and the final URL,
its dot segments resolved, must keep the template's scheme, host and port and the path before its
first placeholder. Redirects are not followed, so only a 2xx is `ok`. The result names the label,
never the filled URL, and secret values are redacted from it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from functools import partial

import httpx

from agentd.actions import ActionContext
from agentd.actions.command import redact, resolve_secrets
from agentd.config import SECRET_PLACEHOLDER, HttpAction, secret
from agentd.errors import ActionFailed
from agentd.models import JSON
from agentd.outside.fetch import exchange

RESERVED_ARGS = frozenset({"url", "method", "body"})
_PLACEHOLDER = re.compile(r"\{(secret:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_quote_segment = partial(urllib.parse.quote, safe="")


class HttpExecutor:
    """Sends the request; any HTTP status is a result (`ok` only for 2xx), not an exception."""

    def __init__(
        self,
        name: str,
        cfg: HttpAction,
        transport: httpx.AsyncBaseTransport | None = None,
        secrets: Callable[[str], str | None] = secret,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.idempotent = cfg.idempotent
        self.transport = transport
        self.lookup = secrets  # the daemon's variable NAME → its value (config.secret)

    async def execute(self, args: JSON, ctx: ActionContext) -> JSON:
        method, label, body = self._request(args)
        secrets = resolve_secrets(self.cfg.secret_names(), self.lookup, self.name)
        url = self._url(label, args, secrets)
        headers = {k: _fill_secrets(v, secrets) for k, v in self.cfg.headers.items()}
        if ctx.traceparent is not None:  # the receiver's spans join the run's trace
            headers["traceparent"] = ctx.traceparent
        headers["Idempotency-Key"] = ctx.idempotency_key  # last: the one a receiver dedupes on
        result = await exchange(
            method,
            url,
            timeout_s=self.cfg.timeout_s,
            excerpt_bytes=self.cfg.body_excerpt_bytes,
            content=body,
            headers=headers,
            transport=self.transport,
            ok_statuses=range(200, 300),
        )
        return redact({"url": label, **result}, secrets)

    async def verify(self, args: JSON, ctx: ActionContext) -> bool | None:
        """An HTTP endpoint cannot be asked whether a request happened: always unknown."""
        return None

    async def fence(self, ctx: ActionContext, spawned: JSON | None) -> JSON:
        """A request starts no process: its connection died with the daemon."""
        return {"killed": [], "survivors": []}

    def _request(self, args: JSON) -> tuple[str, str, str | None]:
        """(method, url label, body), re-checked against the config; ActionFailed if off the menu."""
        unknown = sorted(set(args) - RESERVED_ARGS - set(self.cfg.params))
        if unknown:
            raise ActionFailed(f"action {self.name!r} takes no argument {', '.join(unknown)}")
        for pname, param in self.cfg.params.items():
            value = args.get(pname)
            if isinstance(value, str) and (why := param.refusal(value)):
                raise ActionFailed(f"action {self.name!r}: {pname} {why}")
        methods: list[str] = list(self.cfg.methods)
        method = args.get("method", methods[0] if len(methods) == 1 else None)
        if method not in methods:
            raise ActionFailed(
                f"action {self.name!r}: method {method!r} is not one of {', '.join(methods)}"
            )
        body = args.get("body")
        if body is not None and not isinstance(body, str):
            raise ActionFailed(f"action {self.name!r}: body must be a string")
        label = args.get("url")
        if not isinstance(label, str) or label not in self.cfg.url_templates:
            raise ActionFailed(
                f"action {self.name!r}: url {label!r} is not on its allowlist "
                f"({', '.join(self.cfg.url_templates)})"
            )
        return method, label, body

    def _url(self, label: str, args: JSON, secrets: Mapping[str, str]) -> str:
        """The template of `label` filled in one pass (a value is never expanded again), checked
        to stay under the template's host and path prefix."""
        template = self.cfg.url_templates[label]

        def one(match: re.Match[str]) -> str:
            is_secret, name = match.groups()
            if is_secret:
                return secrets[name]  # the operator's value, as written: it may span segments
            value = args.get(name)
            if not isinstance(value, str):
                raise ActionFailed(f"placeholder {{{name}}} in {label!r} needs a string argument")
            if why := _steers(value):
                raise ActionFailed(f"action {self.name!r}: {name} {why}")
            return _quote_segment(value)

        url = _PLACEHOLDER.sub(one, template)
        if not _stays_under(template, url):
            raise ActionFailed(f"action {self.name!r}: url {label!r} filled in leaves its template")
        return url


def _fill_secrets(text: str, secrets: Mapping[str, str]) -> str:
    return SECRET_PLACEHOLDER.sub(lambda m: secrets[m.group(1)], text)


def _steers(value: str) -> str | None:
    """Why a param value could move a request to another path, or None when it cannot."""
    seen = value
    for _ in range(4):  # decoded until stable: %2e%2e and %252e%252e are '..' to some server
        if seen in (".", "..") or "/" in seen or "\\" in seen:
            return "must not be '.' or '..' or hold '/' or '\\', even percent-encoded"
        decoded = urllib.parse.unquote(seen)
        if decoded == seen:
            return None
        seen = decoded
    return "is percent-encoded too many times"


def _stays_under(template: str, url: str) -> bool:
    """Whether `url` keeps the scheme, host and port of `template` and, dot segments resolved,
    the path before its first placeholder."""
    want = urllib.parse.urlsplit(template.split("{", 1)[0])
    got = urllib.parse.urlsplit(url)
    return (got.scheme, got.netloc) == (want.scheme, want.netloc) and _resolved(
        got.path
    ).startswith(_resolved(want.path))


def _resolved(path: str) -> str:
    """`path` with `%2e` decoded and dot segments resolved (RFC 3986 §5.2.4), as a server would."""
    segments = re.sub("%2e", ".", path, flags=re.IGNORECASE).split("/")
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment not in (".", ".."):
            out.append(segment)
            continue
        if segment == ".." and len(out) > 1:
            out.pop()
        if i == len(segments) - 1:
            out.append("")  # "/a/b/.." is "/a/": the trailing slash stays
    return "/".join(out)
