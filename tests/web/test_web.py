"""The web inbox over HTTP (httpx against the daemon's running app): login (and back to the page
asked for), logout and the cookie's flags, the token read again when it changes, the headers that
forbid framing, the trusted-host check, cross-site posts refused, written text rendered inert,
flash text only from fixed codes, and the pages off unless `[web] enabled`. The operator's
decisions over HTTP are in tests/web/test_web_actions.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import store as store_module
from agentd.errors import ConfigError
from agentd.web import auth
from tests.configs import FINISH, act, scripted_home, with_web
from tests.conftest import Home, closed_port, finished, wait_for, waiting

CONFIG = scripted_home(["finish", "ask"])
HOSTILE = "<script>alert(1)</script> \x1b[2J\x1b[31mred \u202eevil"
ASK = act("ask", "need it", question=HOSTILE)
# What a browser sends with a form it posts to its own page.
SAME = {"Origin": "http://localhost:8765", "Sec-Fetch-Site": "same-origin"}


def web(home: Home) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(home.paths.api_sock))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost:8765")


async def started(home: Home, serve: Any) -> tuple[int, Any]:
    home.write_config(with_web(CONFIG), [ASK, FINISH])
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
        assert f"Answered item {item.item_id}." in page.text
        again = await c.post(f"/items/{item.item_id}/answer", data={"text": "no"}, headers=same)
        assert again.status_code == 303  # back to the item's page, never left on the POST
        assert again.headers["location"].startswith(f"/items/{item.item_id}?error=refused&")
        shown = await c.get(again.headers["location"])
        assert "Not done: the item" in shown.text and "already answered" in shown.text
    await wait_for(finished(home, run_id))
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).answer == "eu-west-1"


async def test_web_answer_tells_the_daemon_directly_not_through_its_own_socket(
    home: Home, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the safety net at 60 s only the page's own word to the scheduler can wake the run
    within the test; the page's write sends no poke to the daemon's own socket (wasted work)."""
    home.write_config(with_web(CONFIG, "safety_scan_s = 60"), [ASK, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    pokes: list[Path] = []
    monkeypatch.setattr(store_module, "poke", lambda path: pokes.append(path))
    async with web(home) as c:
        await login(c, home)
        r = await c.post(f"/items/{item.item_id}/answer", data={"text": "eu-west-1"}, headers=SAME)
        assert r.status_code == 303
    await wait_for(finished(home, run_id), timeout_s=3)
    assert pokes == []


async def test_web_events_stream_needs_a_login(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        assert (await c.get("/events")).status_code == 401


async def test_web_login_comes_back_to_the_page_asked_for(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    page = f"/items/{item.item_id}"  # the link a notification carries
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        asked = await c.get(page)
        assert asked.status_code == 303
        assert asked.headers["location"] == f"/login?next=%2Fitems%2F{item.item_id}"
        form = await c.get(asked.headers["location"])
        assert f'name="next" value="{page}"' in form.text
        r = await c.post("/login", data={"token": token, "next": page}, headers=SAME)
        assert r.status_code == 303 and r.headers["location"] == page
        shown = await c.get(page)
    assert shown.status_code == 200 and f"Item {item.item_id}:" in shown.text


async def test_web_login_never_sends_the_browser_to_another_host(home: Home, serve: Any) -> None:
    await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    elsewhere = ["//evil.example/x", "http://evil.example/", "/\\evil.example", "https:x",
                 "/\t/evil.example", "evil.example", ""]  # fmt: skip
    async with web(home) as c:
        for target in elsewhere:
            r = await c.get("/login", params={"token": token, "next": target})
            assert r.headers["location"] == "/", target
        kept = await c.get("/login", params={"token": token, "next": "/?all=1"})
    assert kept.headers["location"] == "/?all=1"


async def test_web_a_cross_site_link_is_reopened_only_on_this_server(
    home: Home, serve: Any
) -> None:
    """A link from another site gets a page that opens it again from our origin (the Strict
    cookie then goes along); a path that browsers read as another host reopens the inbox."""
    _, item = await started(home, serve)
    cross = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    async with web(home) as c:
        r = await c.get(f"/items/{item.item_id}", headers=cross)
        assert r.status_code == 200
        assert f'content="0;url=/items/{item.item_id}"' in r.text
        # Chromium sends "//evil.example/x" as the path when a link says so.
        raw = await c.send(c.build_request("GET", "http://localhost:8765//evil.example/x",
                                           headers=cross))  # fmt: skip
        assert 'content="0;url=/"' in raw.text and "evil.example" not in raw.text
        same = await c.get(f"/items/{item.item_id}")  # no Sec-Fetch-Site: the login, as ever
        assert same.status_code == 303 and same.headers["location"].startswith("/login?next=")


def test_web_local_path_accepts_only_paths_on_this_server() -> None:
    assert auth.local_path("/items/5") == "/items/5"
    assert auth.local_path("/goals?x=1#y") == "/goals?x=1#y"
    for bad in ("//host", "///host", "/\\host", "\\\\host", "http://host/", "javascript:alert(1)",
                "/\nfoo", " /items/5", None):  # fmt: skip
        assert auth.local_path(bad) == "/", bad


async def test_web_old_item_links_lead_to_the_item_page(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        r = await c.get(f"/inbox/{item.item_id}")
    assert r.status_code == 301 and r.headers["location"] == f"/items/{item.item_id}"


async def test_web_every_response_forbids_framing_and_sniffing(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        answers = [await c.get("/login"), await c.get("/")]  # a page, then a redirect to login
        await login(c, home)
        answers += [
            await c.get(f"/items/{item.item_id}"),
            await c.get("/items/999"),  # 404 page
            await c.get("/api/inbox"),  # 401 without the Bearer token
            await c.get("/api/inbox", headers={"Authorization": f"Bearer {token}"}),
            await c.post("/logout", headers={"Origin": "http://evil.example"}),  # 403
            await c.get("/", headers={"Host": "evil.example"}),  # 400
        ]
    assert [r.status_code for r in answers] == [200, 303, 200, 404, 401, 200, 403, 400]
    for r in answers:
        assert r.headers["x-frame-options"] == "DENY", r.url
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], r.url
        assert r.headers["x-content-type-options"] == "nosniff", r.url
        assert r.headers["referrer-policy"] == "no-referrer", r.url


async def test_web_login_answers_are_never_cached(home: Home, serve: Any) -> None:
    await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        answers = [
            await c.get("/login"),
            await c.get("/login", params={"token": "guess"}),
            await c.get("/login", params={"token": token}),
            await c.post("/login", data={"token": token}, headers=SAME),
        ]
    assert [r.status_code for r in answers] == [200, 403, 303, 303]
    assert all(r.headers["cache-control"] == "no-store" for r in answers)


async def test_web_logout_forgets_the_session(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        refused = await c.post("/logout", headers={"Sec-Fetch-Site": "same-site"})
        assert refused.status_code == 403 and (await c.get("/")).status_code == 200
        r = await c.post("/logout", headers=SAME)
        assert r.status_code == 303 and r.headers["location"] == "/login?done=logged-out"
        assert "max-age=0" in r.headers["set-cookie"].lower()
        assert auth.COOKIE not in c.cookies
        assert (await c.get("/")).headers["location"] == "/login"
        assert "Logged out." in (await c.get("/login?done=logged-out")).text


async def test_web_a_new_token_takes_effect_without_a_restart(home: Home, serve: Any) -> None:
    await started(home, serve)
    old = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        await login(c, home)
        new = home.paths.api_token.with_name("api.token.new")
        new.write_text("a-rotated-token-of-forty-three-characters-xx\n")
        new.chmod(0o600)
        new.replace(home.paths.api_token)  # a rotation: a new file renamed into place
        assert (await c.get("/")).headers["location"] == "/login"  # the old cookie is void
        assert (await c.get("/login", params={"token": old})).status_code == 403
        assert (
            await c.get("/login", params={"token": "a-rotated-token-of-forty-three-characters-xx"})
        ).status_code == 303
        assert (await c.get("/")).status_code == 200
        bearer = {"Authorization": "Bearer a-rotated-token-of-forty-three-characters-xx"}
        assert (await c.get("/api/inbox", headers=bearer)).status_code == 200


async def test_web_flash_shows_fixed_wording_never_the_query(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    page = f"/items/{item.item_id}"
    async with web(home) as c:
        await login(c, home)
        forged = [
            await c.get("/", params={"done": "Your session expired: call +1 555 0100"}),
            await c.get(page, params={"done": "approved", "item": "5 — call +1 555 0100"}),
            await c.get(page, params={"error": "refused", "note": "call +1 555 0100"}),
        ]
        fixed = await c.get(page, params={"done": "denied", "item": str(item.item_id)})
    for r in forged:
        assert "555 0100" not in r.text
    assert 'class="flash"' not in forged[0].text and 'class="flash"' not in forged[1].text
    assert "Not done: the item&#x27;s state does not allow it.</p>" in forged[2].text
    assert f"Denied item {item.item_id}; the run is told." in fixed.text


async def test_web_pages_are_off_unless_enabled(home: Home, serve: Any) -> None:
    port = closed_port()
    home.write_config(CONFIG + f"\n[api]\nport = {port}\n", [FINISH])
    await serve()
    token = home.paths.api_token.read_text().strip()
    bearer = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as tcp, web(home) as unix:
        for c in (tcp, unix):
            for path in ("/", "/login", f"/login?token={token}", "/items/1", "/events"):
                r = await c.get(path)
                assert r.status_code == 404 and "[web] enabled" in r.text, path
            assert (await c.get("/api/inbox", headers=bearer)).status_code == 200
        daemon = (await tcp.get("/api/daemon", headers=bearer)).json()
    assert daemon["port"] == port and daemon["web"] is False


def test_web_enabled_must_be_a_true_boolean(home: Home) -> None:
    for value in ('"yes"', '"true"', "1"):
        with pytest.raises(ConfigError, match="enabled"):
            home.write_config(CONFIG + f"\n[web]\nenabled = {value}\n")


def test_web_port_and_listener_follow_the_documented_table() -> None:
    table = {  # ([api] port, [web] enabled) → (127.0.0.1 listener, pages' port)
        (None, False): (None, None),
        (None, True): (8765, 8765),
        (9000, False): (9000, None),
        (9000, True): (9000, 9000),
    }
    for (port, enabled), expected in table.items():
        api, web_cfg = config.ApiConfig(port=port), config.WebConfig(enabled=enabled)
        assert (api.listen_port(web_cfg), web_cfg.port(api)) == expected, (port, enabled)
