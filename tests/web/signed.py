"""Requests signed as the pages' script signs them (agentd/web/proof.py): an httpx `Auth` that asks
`/prove` first, refuses to go on unless the answer proves agentd holds the session's key, then
signs the request. `form_field` gives a form's first field the same way."""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Generator

import httpx

from agentd.web import keys, proof


class NotAgentd(Exception):
    """The server did not prove it holds the session: nothing was signed for it."""


def _prove_request(request: httpx.Request, session_id: str, nonce: str) -> httpx.Request:
    url = request.url.copy_with(path="/prove", query=f"session={session_id}&nonce={nonce}".encode())
    return httpx.Request("GET", url)


def _signature(
    session: str, request: httpx.Request, answer: httpx.Response, nonce: str
) -> str | None:
    """The request's `X-Agentd-Auth`; None when agentd says the session is not live (the
    request then goes unsigned, and gets what the page would: a 401 or the login)."""
    session_id, key = session.split(".")
    if answer.status_code == 401:
        return None
    if answer.status_code != 200:
        raise NotAgentd(f"/prove answered {answer.status_code}")
    given = answer.json()
    if given.get("proof") != proof.daemon_proof(key, nonce, str(given.get("challenge"))):
        raise NotAgentd("the proof does not match")
    target = request.url.raw_path.decode("ascii")
    mac = proof.request_mac(key, request.method, target, given["challenge"])
    return f"{session_id}.{given['challenge']}.{mac}"


class Signed(httpx.Auth):
    """Sign every request with `session` (`ID.KEY`, what a login hands the page)."""

    def __init__(self, session: str) -> None:
        self.session = session

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        nonce = secrets.token_hex(16)
        answer = yield _prove_request(request, self.session.split(".")[0], nonce)
        answer.read()
        if (signature := _signature(self.session, request, answer, nonce)) is not None:
            request.headers[keys.HEADER] = signature
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        nonce = secrets.token_hex(16)
        answer = yield _prove_request(request, self.session.split(".")[0], nonce)
        await answer.aread()
        if (signature := _signature(self.session, request, answer, nonce)) is not None:
            request.headers[keys.HEADER] = signature
        yield request


async def form_field(c: httpx.AsyncClient, session: str, path: str) -> str:
    """A form's `_auth` value for `POST path`, as the page's script prepends it."""
    nonce = secrets.token_hex(16)
    request = c.build_request("POST", path)
    answer = await c.send(_prove_request(request, session.split(".")[0], nonce))
    signature = _signature(session, request, answer, nonce)
    assert signature is not None, "the session is not live"
    return signature
