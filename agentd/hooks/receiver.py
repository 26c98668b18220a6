"""`POST /hooks/NAME`: one delivery, in the order that costs a hostile sender the least — the
hook exists, the hook is under its rate (429; only a delivery that proved itself spends it, so
a stranger cannot use up the real sender's), its bearer token holds (401: before the body),
the body is within the hook's limit (413: before it is read when declared, else as soon as it
passes), its signature holds (401), it parses (400 naming the problem); then its events are
recorded in one transaction (agentd/operator/events.py `receiving`) on the daemon's writer, and
only after the commit the sender gets its 2xx. A refusal records nothing, is one log line (never
the body; at most 20 a minute per hook) and closes the connection (agentd/api/connections.py);
a request that proved itself vouches for its connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentd import config as config_env
from agentd.config import Config
from agentd.config.hooks import HookConfig
from agentd.errors import AgentdError
from agentd.hooks import kinds, verify
from agentd.hooks.stats import Stats
from agentd.operator import events as operator_events
from agentd.operator import hook_counts
from agentd.text import to_json
from agentd.web import bodies, trust

log = structlog.get_logger("agentd.hooks")
PREFIX = "/hooks/"
WHY_CHARS = 300  # a refusal's reason, in the log line and the answer
# The daemon's store writer: runs one transaction on its writer thread (agentd/db/store.py).
Write = Callable[[Callable[[Any], int]], Awaitable[int]]
Read = Callable[[Callable[[Any], Any]], Awaitable[Any]]  # the daemon's store reader
LOG_LINES, LOG_WINDOW_S = 20, 60.0  # refusals logged per hook per window (all are counted)
FLUSH_S = 5.0  # refusals are written at most this often (they write nothing else)


class Refusal(Exception):
    def __init__(self, status: int, why: str, *, said: str | None = None) -> None:
        super().__init__(why[:WHY_CHARS])  # a sender's bytes quoted in `why` stay bounded
        self.status = status
        self.said = (said or why)[:WHY_CHARS]  # what the sender reads (the log has `why`)


def _json(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(to_json(value), status, headers, media_type="application/json")


class Receiver:
    """The ASGI app for `/hooks/NAME`; `stats` is what `agentd hooks` shows."""

    def __init__(
        self,
        current: Callable[[], Config],
        write: Write,
        changed: Callable[[], None],
        read: Read | None = None,
    ) -> None:
        self.current = current
        self.write = write
        self.changed = changed
        self.read = read  # the kept counts, read once (None: counts since start only)
        self.stats = Stats()
        self._loaded = asyncio.Lock()
        self._flushing: asyncio.Task[None] | None = None
        self._logged: dict[str, tuple[float, int, int]] = {}  # window start, lines, not logged

    async def loaded(self) -> Stats:
        """The stats, with the counts kept in the database added at the first call."""
        async with self._loaded:
            if self.read is not None:
                read, self.read = self.read, None
                try:
                    self.stats.restore(await read(hook_counts.rows))
                except AgentdError as e:  # shown from this start on; the next start reads them
                    log.error("hook.counts_not_read", error=str(e))
        return self.stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        name = scope["path"][len(PREFIX) :]
        await self.loaded()
        try:
            response = await self._deliver(request, name)
        except Refusal as e:
            if e.status != 404:
                self.stats.refused(name, e.status, str(e))
                self._log_refused(name, e.status, str(e))
                self._flush_soon()
            headers = {"Retry-After": "60"} if e.status in (429, 503) else None
            response = _json({"error": e.said}, e.status, headers)
        await response(scope, receive, send)

    async def _deliver(self, request: Request, name: str) -> Response:
        hook = self.current().hooks.get(name)
        if hook is None:
            raise Refusal(404, f"no hook {name!r} in config.toml")
        if request.method != "POST":
            raise Refusal(405, "a hook is sent with POST")
        # Only a delivery that proved itself spends the rate: a stranger's requests (401) cannot
        # use up the budget of the hook's real sender. Over it, a 429 comes before the body.
        self._under_rate(name, hook, spend=False)
        if hook.token_env is not None:
            self._bearer(request, hook.token_env)
            trust.vouch(request.scope)  # before its body: a sender with the token is no stranger
        body = await self._body(request, hook)
        message_id = self._signed(request, name, hook, body)
        trust.vouch(request.scope)  # a sender that proved itself keeps its connection
        self._under_rate(name, hook, spend=True)
        try:
            events, left_out = self._events(request, name, hook, message_id, body)
        except kinds.Malformed as e:
            raise Refusal(400, str(e)) from None
        if left_out:  # an authenticated sender's: one line per delivery is bounded by its rate
            log.warning("hook.alerts_left_out", hook=name, recorded_of=len(events) + left_out,
                        left_out=left_out, note=f"set max_alerts: {kinds.MAX_ALERTS}")  # fmt: skip
        rows = [(e.name, e.data, e.key) for e in events]
        counts = {**self.stats.take_pending(name), "last_at": time.time(), "last": "accepted"}
        try:
            new = await self.write(operator_events.receiving(f"hook:{name}", rows, counts))
        except AgentdError as e:  # the store refused or is down: the sender retries later
            self.stats.put_back(name, {"refused_by": counts["refused_by"]})
            log.error("hook.not_recorded", hook=name, error=str(e))
            raise Refusal(503, "not recorded; send again later") from None
        if new:
            self.changed()  # triggers and waiting runs are looked at now
        self.stats.accepted(name, new, len(rows) - new)
        answer = {"recorded": new, "duplicates": len(rows) - new}
        return _json({**answer, "left_out": left_out} if left_out else answer)

    def _log_refused(self, name: str, status: int, why: str) -> None:
        """One line per refusal, at most LOG_LINES a hook per LOG_WINDOW_S: a flood of strangers
        cannot fill the journal (the next line says how many were not logged; all are counted)."""
        now = time.monotonic()
        start, lines, quiet = self._logged.get(name, (now, 0, 0))
        if now - start >= LOG_WINDOW_S:
            start, lines = now, 0
        if lines >= LOG_LINES:
            self._logged[name] = (start, lines, quiet + 1)
            return
        more = {"not_logged": quiet} if quiet else {}
        log.warning("hook.refused", hook=name, status=status, why=why, **more)
        self._logged[name] = (start, lines + 1, 0)

    def _flush_soon(self) -> None:
        """Refusals are written FLUSH_S after the first one not yet written: a flood of them
        costs one write per FLUSH_S, never one per request."""
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(FLUSH_S)
        deltas = {name: self.stats.take_pending(name) for name in list(self.stats.pending)}
        try:
            await self.write(hook_counts.adding(deltas))
        except AgentdError as e:
            for name, delta in deltas.items():
                self.stats.put_back(name, delta)
            log.error("hook.counts_not_written", error=str(e))

    async def flush(self) -> None:
        """Write the refusals not yet written now (the daemon stopping)."""
        if self._flushing is not None and not self._flushing.done():
            self._flushing.cancel()
        deltas = {name: self.stats.take_pending(name) for name in list(self.stats.pending)}
        if deltas:
            try:
                await self.write(hook_counts.adding(deltas))
            except AgentdError as e:  # the store closing or down: a stop never fails for counts
                log.error("hook.counts_not_written", error=str(e))

    def _under_rate(self, name: str, hook: HookConfig, *, spend: bool) -> None:
        if not self.stats.admit(name, hook.rate_per_minute, time.monotonic(), spend=spend):
            raise Refusal(429, f"over the hook's rate ({hook.rate_per_minute} a minute)")

    def _secret(self, env: str) -> str:
        value = config_env.secret(env)
        if value is None:
            raise Refusal(503, f"the hook's secret {env} is not set in the daemon's environment",
                          said="this hook is not ready (its secret is not set)")  # fmt: skip
        return value

    def _bearer(self, request: Request, env: str) -> None:
        try:
            verify.bearer(request.headers, self._secret(env))
        except verify.Unverified as e:
            raise Refusal(401, str(e), said="not authenticated") from None

    async def _body(self, request: Request, hook: HookConfig) -> bytes:
        try:
            return await bodies.read(request, hook.max_body_bytes)
        except bodies.BodyRefused as e:
            raise Refusal(e.status, str(e)) from None

    def _signed(self, request: Request, name: str, hook: HookConfig, body: bytes) -> str | None:
        """The delivery's id (Standard Webhooks or GitHub) once its signature holds; for a
        bearer-only json hook, the id the sender gives in `webhook-id` or `Idempotency-Key`."""
        headers = request.headers
        try:
            if hook.type == "github" and hook.secret_env is not None:
                return verify.github(headers, body, self._secret(hook.secret_env))
            if hook.secret_env is not None:
                now = time.time()
                secret = self._secret(hook.secret_env)
                return verify.standard(headers, body, secret, now, hook.tolerance_s)
        except verify.Unverified as e:
            raise Refusal(401, str(e), said="not authenticated") from None
        given = headers.get("webhook-id") or headers.get("idempotency-key")
        return given[:200] if given else None

    def _events(
        self, request: Request, name: str, hook: HookConfig, message_id: str | None, body: bytes
    ) -> tuple[list[kinds.Incoming], int]:
        """The delivery's events, and how many alerts were left out (past MAX_ALERTS)."""
        if hook.type == "alertmanager":
            return kinds.alertmanager(name, hook, body)
        if hook.type == "github":
            kind = request.headers.get("x-github-event", "")
            form = request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"
            )
            return kinds.github(name, kind, message_id or "", body, form=form), 0
        return kinds.json_event(name, hook, message_id, body), 0
