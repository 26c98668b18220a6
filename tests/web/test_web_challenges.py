"""A signed request (web/proof.py) opens one request: its challenge is used once, for its session,
its method and its path; and however many challenges `/prove` hands out to anyone (it needs no
login), none pushes out the one a page is about to sign with."""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from agentd.db import items as qi
from agentd.web import keys, proof
from tests.conftest import Home
from tests.web.test_web import SAME, handed, started, web


async def signature(c: httpx.AsyncClient, session: str, method: str, path: str) -> str:
    """What the page's script sends as `X-Agentd-Auth` for `method path`."""
    session_id, key = session.split(".")
    nonce = secrets.token_hex(16)
    answer = (await c.get("/prove", params={"session": session_id, "nonce": nonce})).json()
    assert answer["proof"] == proof.daemon_proof(key, nonce, answer["challenge"])
    mac = proof.request_mac(key, method, path, answer["challenge"])
    return f"{session_id}.{answer['challenge']}.{mac}"


async def test_web_a_signature_opens_one_request_of_its_method_and_path(
    home: Home, serve: Any
) -> None:
    _, item = await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        session, _ = handed(await c.get("/login", params={"token": token}))
        other, _ = handed(await c.get("/login", params={"token": token}))
        signed = await signature(c, session, "GET", "/")
        assert (await c.get("/", headers={keys.HEADER: signed})).status_code == 200
        again = await c.get("/", headers={keys.HEADER: signed})  # the same header, replayed
        assert again.status_code == 401 and "<main>" not in again.text

        approve = f"/items/{item.item_id}/approve"
        for signed in (
            await signature(c, session, "GET", approve),  # a GET's, sent as a POST
            await signature(c, session, "POST", f"/items/{item.item_id}/dismiss"),  # another path
            # another session's challenge and signature under this session's id
            session.split(".")[0]
            + "."
            + (await signature(c, other, "POST", approve)).split(".", 1)[1],
        ):
            r = await c.post(approve, headers={keys.HEADER: signed, **SAME})
            assert r.status_code in (401, 303), r.status_code
        assert home.store.read(lambda db: qi.get_item(db, item.item_id)).status == "open"


def test_web_a_flood_of_challenges_pushes_out_none_handed_out() -> None:
    challenges = proof.Challenges()
    mine = challenges.issue(7)
    for _ in range(5000):  # anyone may ask /prove, for any session id
        challenges.issue(7)
    assert challenges.take(mine, 7)
    assert not challenges.take(mine, 7)  # once
    assert not challenges.take(challenges.issue(7), 8)  # not another session's
    forged = mine[: proof.HEAD_CHARS] + "A" * (len(mine) - proof.HEAD_CHARS)
    assert not challenges.good(forged, 7)
