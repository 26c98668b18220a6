"""The web inbox over HTTP (httpx against the daemon's running app): login (a key of its own,
and back to the page asked for), a navigation's shell that holds nothing, logout, the token read
again when it changes, the headers that forbid framing, the strict trusted-host check, cross-site
posts refused, written text rendered inert, flash text only for what was just done, and the pages
off unless `[web] enabled`. The operator's decisions over HTTP are in
tests/web/test_web_actions.py; sessions (listed, revoked, expired) in test_web_sessions.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd import config
from agentd.db import items as qi
from agentd.db import poke as poke_module
from agentd.errors import ConfigError
from agentd.web import auth, keys
from tests.configs import FINISH, act, scripted_home, with_web
from tests.conftest import Home, closed_port, finished, wait_for, waiting
from tests.web.signed import Signed

CONFIG = scripted_home(["finish", "ask"])
HOSTILE = "<script>alert(1)</script> \x1b[2J\x1b[31mred \u202eevil"
ASK = act("ask", "need it", question=HOSTILE)
# What a browser sends with a form it posts to its own page.
SAME = {"Origin": "http://localhost:8765", "Sec-Fetch-Site": "same-origin"}


def web(home: Home) -> httpx.AsyncClient:
    # A new connection per request. The server rightly closes a connection idle for its keep-alive
    # timeout (5 s); a client that sends on it as the server closes it (the test's loop stalled
    # across those 5 s on a loaded machine) gets no answer. A browser resends then (a reused
    # connection that closed unanswered); httpx does not, and a test would fail for HTTP/1.1's race.
    keep_none = httpx.Limits(max_keepalive_connections=0)
    transport = httpx.AsyncHTTPTransport(uds=str(home.paths.api_sock), limits=keep_none)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost:8765")


async def started(home: Home, serve: Any) -> tuple[int, Any]:
    home.write_config(with_web(CONFIG), [ASK, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return run_id, item


def handed(r: httpx.Response) -> tuple[str, str]:
    """What a login's answer hands the page's script: (the key, the page to open next)."""
    assert r.status_code == 200, r.status_code
    key = re.search(r'data-key="([^"]+)"', r.text)
    where = re.search(r'data-next="([^"]*)"', r.text)
    assert key and where, r.text
    return key[1], where[1].replace("&amp;", "&")


async def login(c: httpx.AsyncClient, home: Home) -> str:
    """Log in as the page's script does: the key it is handed goes with every request after."""
    token = home.paths.api_token.read_text().strip()
    key, where = handed(await c.get("/login", params={"token": token}))
    assert where == "/"
    c.auth = Signed(key)
    return key


async def test_web_pages_need_a_login(home: Home, serve: Any) -> None:
    _, item = await started(home, serve)
    async with web(home) as c:
        for path in ("/", f"/items/{item.item_id}", "/goals", "/runs/1"):
            r = await c.get(path)  # a navigation: the shell, which holds nothing of the inbox
            assert r.status_code == 401 and 'id="boot"' in r.text, path
            assert "<main>" not in r.text and "need it" not in r.text, path
        bad = await c.get("/login", params={"token": "guess"})
        assert bad.status_code == 403 and "data-key" not in bad.text
        wrong = await c.get("/", headers={keys.HEADER: "a" * 43})
        assert wrong.status_code == 401 and "<main>" not in wrong.text


async def test_web_each_login_hands_the_page_a_key_of_its_own(home: Home, serve: Any) -> None:
    await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        first = await c.get("/login", params={"token": token})
        second = await c.post("/login", data={"token": token}, headers=SAME)
        (a, _), (b, _) = handed(first), handed(second)
        assert a != b and token not in first.text and token not in second.text
        # No cookie opens anything: the one older versions set is deleted.
        assert first.headers["set-cookie"].startswith(f"{auth.LEGACY_COOKIE}=")
        assert "max-age=0" in first.headers["set-cookie"].lower()
        for key in (a, b):
            assert (await c.get("/", auth=Signed(key))).status_code == 200


async def test_web_refuses_untrusted_hosts(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        await login(c, home)
        for host in ("attacker.example", "attacker.example:8765", "127.0.0.2", "[::1]evil",
                     "[::1]evil:8765", "localhost:8765x"):  # fmt: skip
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
        assert again.headers["location"].startswith(f"/items/{item.item_id}?note=")
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
    monkeypatch.setattr(poke_module, "poke", lambda path: pokes.append(path))
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
    """The shell sends a browser without a key to /login?next=PAGE (tested in a real browser in
    test_web_browser.py); the login's form carries it, and its answer opens it."""
    _, item = await started(home, serve)
    page = f"/items/{item.item_id}"  # the link a notification carries
    token = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        form = await c.get("/login", params={"next": page})
        assert f'name="next" value="{page}"' in form.text
        r = await c.post("/login", data={"token": token, "next": page}, headers=SAME)
        key, where = handed(r)
        assert where == page
        shown = await c.get(page, auth=Signed(key))
    assert shown.status_code == 200 and f"Item {item.item_id}:" in shown.text


async def test_web_login_never_sends_the_browser_to_another_host(home: Home, serve: Any) -> None:
    await started(home, serve)
    token = home.paths.api_token.read_text().strip()
    elsewhere = ["//evil.example/x", "http://evil.example/", "/\\evil.example", "https:x",
                 "/\t/evil.example", "evil.example", ""]  # fmt: skip
    async with web(home) as c:
        for target in elsewhere:
            r = await c.get("/login", params={"token": token, "next": target})
            assert handed(r)[1] == "/", target
        kept = await c.get("/login", params={"token": token, "next": "/?all=1"})
    assert handed(kept)[1] == "/?all=1"


async def test_web_a_link_from_anywhere_gets_the_shell_and_nothing_else(
    home: Home, serve: Any
) -> None:
    """A link from another site (a mail, the ntfy app, another 127.0.0.1 port) carries no key:
    its answer is the shell, whatever it claims to be, and names no other host."""
    _, item = await started(home, serve)
    cross = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    async with web(home) as c:
        await login(c, home)
        c.auth = None  # type: ignore[assignment]
        r = await c.get(f"/items/{item.item_id}", headers=cross)
        assert r.status_code == 401 and 'id="boot"' in r.text and "need it" not in r.text
        # Chromium sends "//evil.example/x" as the path when a link says so.
        raw = await c.send(c.build_request("GET", "http://localhost:8765//evil.example/x",
                                           headers=cross))  # fmt: skip
        assert raw.status_code == 401 and "evil.example" not in raw.text


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
        answers = [await c.get("/login"), await c.get("/")]  # a page, then the shell
        await login(c, home)
        answers += [
            await c.get(f"/items/{item.item_id}"),
            await c.get("/items/999"),  # 404 page
            await c.get("/api/inbox"),  # 401 without the Bearer token
            await c.get("/api/inbox", headers={"Authorization": f"Bearer {token}"}),
            await c.post("/logout", headers={"Origin": "http://evil.example"}),  # 403
            await c.get("/", headers={"Host": "evil.example"}),  # 400
        ]
    assert [r.status_code for r in answers] == [200, 401, 200, 404, 401, 200, 403, 400]
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
    assert [r.status_code for r in answers] == [200, 403, 200, 200]
    assert all(r.headers["cache-control"] == "no-store" for r in answers)


async def test_web_logout_ends_the_session(home: Home, serve: Any) -> None:
    await started(home, serve)
    async with web(home) as c:
        key = await login(c, home)
        refused = await c.post("/logout", headers={"Sec-Fetch-Site": "same-site"})
        assert refused.status_code == 403 and (await c.get("/")).status_code == 200
        r = await c.post("/logout", headers=SAME)
        assert r.status_code == 200 and "data-forget" in r.text  # the script drops the key
        login_page = re.search(r'data-next="([^"]+)"', r.text)
        assert login_page and login_page[1].startswith("/login?note=")
        assert "Logged out." in (await c.get(login_page[1].replace("&amp;", "&"))).text
        # The key the browser held opens nothing any more, as a header or a form's field.
        assert (await c.get("/", auth=Signed(key))).status_code == 401
        c.auth = None  # type: ignore[assignment]
        stale = f"{key.split('.')[0]}.{'c' * 24}.{'0' * 64}"  # a signature, for a spent challenge
        form = await c.post("/logout", content=f"_auth={stale}", headers={
            **SAME, "content-type": "application/x-www-form-urlencoded"})  # fmt: skip
        assert form.status_code == 303 and form.headers["location"] == "/login"


async def test_web_a_new_token_takes_effect_without_a_restart(home: Home, serve: Any) -> None:
    await started(home, serve)
    old = home.paths.api_token.read_text().strip()
    async with web(home) as c:
        await login(c, home)
        new = home.paths.api_token.with_name("api.token.new")
        new.write_text("a-rotated-token-of-forty-three-characters-xx\n")
        new.chmod(0o600)
        new.replace(home.paths.api_token)  # a rotation: a new file renamed into place
        assert (await c.get("/")).status_code == 401  # the old session is void
        assert (await c.get("/login", params={"token": old})).status_code == 403
        fresh = await c.get(
            "/login", params={"token": "a-rotated-token-of-forty-three-characters-xx"}
        )
        assert (await c.get("/", auth=Signed(handed(fresh)[0]))).status_code == 200
        bearer = {"Authorization": "Bearer a-rotated-token-of-forty-three-characters-xx"}
        assert (await c.get("/api/inbox", headers=bearer)).status_code == 200


async def test_web_flash_shows_only_what_was_just_done(home: Home, serve: Any) -> None:
    run_id, item = await started(home, serve)
    page = f"/items/{item.item_id}"
    async with web(home) as c:
        await login(c, home)
        forged = [
            await c.get("/", params={"done": "Your session expired: call +1 555 0100"}),
            await c.get(page, params={"done": "approved", "item": "5 — call +1 555 0100"}),
            await c.get(page, params={"error": "refused", "note": "call +1 555 0100"}),
        ]
        r = await c.post(f"{page}/answer", data={"text": "eu-west-1"}, headers=SAME)
        note = r.headers["location"].removeprefix(f"{page}?")
        assert note.startswith("note=") and "answered" not in note  # a key, not a wording
        fixed = await c.get(r.headers["location"])
        elsewhere = await c.get(f"/?{note}")  # the note is for the item's page only
    for r in [*forged, elsewhere]:
        assert "555 0100" not in r.text
        assert 'class="flash"' not in r.text and 'class="error"' not in r.text
    assert f"Answered item {item.item_id}." in fixed.text
    await wait_for(finished(home, run_id))


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


async def test_web_a_crafted_link_cannot_claim_an_action(home: Home, serve: Any) -> None:
    """`?done=approved&item=5` on an item still open: nothing was done, so nothing is said."""
    _, item = await started(home, serve)
    page = f"/items/{item.item_id}"
    async with web(home) as c:
        await login(c, home)
        for done in ("approved", "answered", "denied"):
            r = await c.get(page, params={"done": done, "item": str(item.item_id)})
            assert r.status_code == 200 and 'class="flash"' not in r.text, done
        assert "Logged out." not in (await c.get("/login", params={"done": "logged-out"})).text
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).status == "open"


def test_web_host_names_are_parsed_strictly() -> None:
    for host in ("[::1]evil", "[::1]evil:8765", "[::1]:8765x", "[::1]:", "localhost:",
                 "localhost:8765:1", "localhost:abc", "127.0.0.1:+80", "[::1]]", "localhost.",
                 "localhost:123456", " localhost", "local host"):  # fmt: skip
        assert not auth.host_trusted(host), host
    for host in ("localhost", "LOCALHOST:8765", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8765"):
        assert auth.host_trusted(host), host
