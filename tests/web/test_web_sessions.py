"""Web inbox sessions, one per login, in the home's database: logout ends only its own, `agentd
web sessions` lists them and `--revoke` ends them at the running daemon, and so do expiry and a
new token (`agentd web --rotate`); a form proves its session by its first field only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from click.testing import Result
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.operator import sessions
from tests.conftest import Home
from tests.web.signed import Signed, form_field
from tests.web.test_web import SAME, handed, started, web

FORM = {**SAME, "content-type": "application/x-www-form-urlencoded"}


async def cli(home: Home, *args: str) -> Result:
    """From a thread: the in-process daemon stays free to answer."""
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, app, ["--home", str(home.root), *args])


async def key_for(c: httpx.AsyncClient, home: Home, browser: str) -> str:
    token = home.paths.api_token.read_text().strip()
    return handed(await c.get("/login", params={"token": token}, headers={"user-agent": browser}))[
        0
    ]


async def opens(c: httpx.AsyncClient, key: str) -> bool:
    r = await c.get("/", auth=Signed(key))
    assert r.status_code in (200, 401), r.status_code
    return r.status_code == 200


async def test_web_logout_ends_only_its_own_session(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        phone, desk = await key_for(c, home, "phone"), await key_for(c, home, "desk")
        out = await c.post("/logout", headers=SAME, auth=Signed(phone))
        assert out.status_code == 200
        assert not await opens(c, phone) and await opens(c, desk)


async def test_web_sessions_are_listed_and_revoked_at_the_running_daemon(
    home: Home, serve: Any
) -> None:
    await started(home, serve)
    async with web(home) as c:
        phone, desk = await key_for(c, home, "Phone\x1b[2J"), await key_for(c, home, "Desk")
        listed = await cli(home, "web", "sessions")
        assert listed.exit_code == 0, listed.output
        assert "Desk" in listed.stdout and "Phone\\x1b[2J" in listed.stdout  # shown inert
        found = json.loads((await cli(home, "web", "sessions", "--json")).stdout)
        assert [s["client"] for s in found] == ["Desk", "Phone\x1b[2J"]  # newest first
        phone_id = found[1]["session_id"]

        ended = await cli(home, "web", "sessions", "--revoke", str(phone_id))
        assert ended.exit_code == 0 and "ended 1 web session" in ended.stdout
        assert not await opens(c, phone) and await opens(c, desk)
        again = await cli(home, "web", "sessions", "--revoke", str(phone_id))
        assert again.exit_code == 1 and "is not live" in again.stderr
        assert (await cli(home, "web", "sessions", "--revoke", "all")).exit_code == 0
        assert not await opens(c, desk)
        none = await cli(home, "web", "sessions")
    assert "nobody is logged in" in none.stdout


async def test_web_a_session_ends_when_it_expires(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        key = await key_for(c, home, "phone")
        assert await opens(c, key)
        home.store.write(lambda db: db.execute("UPDATE web_sessions SET expires_at = 1"))
        assert not await opens(c, key)
    assert sessions.live(home.store, home.paths.api_token.read_text().strip()) == []


async def test_web_rotate_ends_every_session(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        key = await key_for(c, home, "phone")
        rotated = await cli(home, "web", "--rotate", "--token")
        assert rotated.exit_code == 0, rotated.output
        assert "1 web session(s) logged in with the old one have ended" in rotated.stderr
        assert not await opens(c, key)
    assert "nobody is logged in" in (await cli(home, "web", "sessions")).stdout


def test_web_session_seen_is_written_only_now_and_then(home: Home) -> None:
    home.root.mkdir(parents=True)
    token = "t" * 43
    session_id = int(sessions.login(home.store, token, "phone", now=1000.0).split(".")[0])
    found = sessions.check(home.store, session_id, token, now=1100.0)
    assert found is not None and found[0].seen_at == 1000.0
    sessions.used(home.store, found[0], now=1100.0)  # too soon to write
    assert sessions.live(home.store, token, now=1100.0)[0].seen_at == 1000.0
    sessions.used(home.store, found[0], now=1000.0 + sessions.SEEN_EVERY_S)
    (live,) = sessions.live(home.store, token, now=1400.0)
    assert live.seen_at == 1000.0 + sessions.SEEN_EVERY_S
    assert sessions.check(home.store, session_id, "u" * 43, now=1400.0) is None  # another token
    late = 1000.0 + sessions.LIFETIME_S
    assert sessions.check(home.store, session_id, token, now=late) is None


def test_web_session_ends_when_idle(home: Home) -> None:
    """A session nobody used for IDLE_S is over, however long its life had to run."""
    home.root.mkdir(parents=True)
    token = "t" * 43
    session_id = int(sessions.login(home.store, token, "phone", now=1000.0).split(".")[0])
    assert sessions.IDLE_S <= 86400 < sessions.LIFETIME_S <= 7 * 86400
    assert sessions.check(home.store, session_id, token, now=999.0 + sessions.IDLE_S) is not None
    assert sessions.check(home.store, session_id, token, now=1001.0 + sessions.IDLE_S) is None


async def test_web_a_form_proves_its_session_by_its_first_field(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    url = f"/items/{item.item_id}/answer"
    async with web(home) as c:
        key = await key_for(c, home, "phone")
        signed = await form_field(c, key, url)
        late = await c.post(url, content=f"text=eu-west-1&_auth={signed}", headers=FORM)
        assert late.status_code == 303 and late.headers["location"] == "/login"
        signed = await form_field(c, key, url)
        long = await c.post(url, content=f"_auth={signed}{'x' * 5000}&text=x", headers=FORM)
        assert long.status_code == 303 and long.headers["location"] == "/login"
        other = await form_field(c, key, f"/items/{item.item_id}/dismiss")  # another path's
        moved = await c.post(url, content=f"_auth={other}&text=eu-west-1", headers=FORM)
        assert moved.status_code == 303 and moved.headers["location"] == "/login"
        assert home.store.read(lambda db: qi.get_item(db, item.item_id)).status == "open"
        signed = await form_field(c, key, url)
        first = await c.post(url, content=f"_auth={signed}&text=eu-west-1", headers=FORM)
        assert first.status_code == 303 and first.headers["location"].startswith(
            f"/items/{item.item_id}?note="
        )
    assert home.store.read(lambda db: qi.get_item(db, item.item_id)).answer == "eu-west-1"
