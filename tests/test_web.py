"""The web inbox over HTTP (httpx against the daemon's running app): login and the cookie's
flags, the trusted-host check, cross-site posts refused, written text rendered inert."""

from __future__ import annotations

import stat
from typing import Any

import httpx
from typer.testing import CliRunner

from agentd.cli import app
from agentd.db import items as qi
from agentd.web import auth
from tests.conftest import Home, finished, wait_for, waiting

CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish", "ask"]
"""
HOSTILE = "<script>alert(1)</script> \x1b[2J\x1b[31mred \u202eevil"
ASK = {"reason": "need it", "action": {"kind": "ask", "question": HOSTILE}}
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def web(home: Home) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(home.paths.api_sock))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost:8765")


async def started(home: Home, serve: Any) -> tuple[int, Any]:
    home.write_config(CONFIG, [ASK, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return run_id, item


async def login(c: httpx.AsyncClient, home: Home) -> None:
    token = home.paths.api_token.read_text().strip()
    r = await c.get("/login", params={"token": token})
    assert r.status_code == 303 and r.headers["location"] == "/"


async def test_web_pages_need_a_login(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        r = await c.get("/")
        assert r.status_code == 303 and r.headers["location"] == "/login"
        bad = await c.get("/login", params={"token": "guess"})
        assert bad.status_code == 403 and auth.COOKIE not in bad.cookies


async def test_web_login_sets_an_httponly_strict_cookie(home: Home, serve: Any) -> None:
    await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        r = await c.get("/login", params={"token": token})
        cookie = r.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert token not in cookie  # the cookie is derived from the token, not the token
        assert (await c.get("/")).status_code == 200


async def test_web_refuses_untrusted_hosts(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        for host in ("attacker.example", "attacker.example:8765", "127.0.0.2"):
            r = await c.get("/", headers={"Host": host})
            assert r.status_code == 400, host
        for host in ("localhost", "127.0.0.1:8765", "[::1]:8765"):
            assert (await c.get("/", headers={"Host": host})).status_code == 200, host


async def test_web_refuses_cross_site_posts(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        url = f"/items/{item.item_id}/answer"
        evil = {"Origin": "http://attacker.example"}
        assert (await c.post(url, data={"text": "x"}, headers=evil)).status_code == 403
        site = {"Sec-Fetch-Site": "cross-site"}
        assert (await c.post(url, data={"text": "x"}, headers=site)).status_code == 403
        null = {"Origin": "null"}
        assert (await c.post(url, data={"text": "x"}, headers=null)).status_code == 403
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).status == "open"


async def test_web_renders_written_text_inert(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        pages = [(await c.get(p)).text for p in ("/", f"/items/{item.item_id}")]
    for text in pages:
        assert "<script>alert" not in text
        assert "\x1b" not in text and "\u202e" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1]
    assert "\\x1b[2J" in pages[1] and "\\u202e" in pages[1]


async def test_web_answer_goes_through_the_inbox_and_wakes_the_run(home: Home, serve: Any) -> None:
    run_id, item = await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        same = {"Origin": "http://localhost:8765", "Sec-Fetch-Site": "same-origin"}
        r = await c.post(f"/items/{item.item_id}/answer", data={"text": "eu-west-1"}, headers=same)
        assert r.status_code == 303
        page = await c.get(r.headers["location"])
        assert "answered item" in page.text
        again = await c.post(f"/items/{item.item_id}/answer", data={"text": "no"}, headers=same)
        assert again.status_code == 400 and "already answered" in again.text
    await wait_for(finished(home, run_id))
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).answer == "eu-west-1"


async def test_web_events_stream_needs_a_login(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        assert (await c.get("/events")).status_code == 401


def test_web_command_prints_the_login_url_and_the_tunnel(home: Home) -> None:
    home.write_config(CONFIG + "\n[web]\nenabled = true\n", [FINISH])
    home.store  # noqa: B018  # creates the database
    done = CliRunner().invoke(app, ["--home", str(home.root), "web"])
    assert done.exit_code == 0, done.output
    token = home.paths.api_token.read_text().strip()
    assert f"http://127.0.0.1:8765/login?token={token}" in done.stdout
    assert "ssh -N -L 8765:127.0.0.1:8765" in done.stderr
    assert stat.S_IMODE(home.paths.api_token.stat().st_mode) == 0o600


def test_web_command_says_how_to_turn_the_pages_on(home: Home) -> None:
    home.write_config(CONFIG, [FINISH])
    done = CliRunner().invoke(app, ["--home", str(home.root), "web"])
    assert done.exit_code == 1
    assert "[web]" in done.stderr and "enabled = true" in done.stderr
