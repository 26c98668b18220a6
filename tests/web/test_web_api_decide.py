"""The JSON API decides, with the Bearer token, through the pages' code path (agentd/operator/
inbox.py): approve (as proposed, or with an edit) and the run goes on; deny with a reason; answer;
dismiss; a repeat is `unchanged`; what the item's state refuses is 409; bad input 400; no such
item 404; no token 401 — and nothing changed by any refusal."""

from __future__ import annotations

from typing import Any

import httpx

from agentd.db import items as qi
from agentd.models import InboxKind, InboxStatus
from tests.configs import FINISH, act, scripted_home, with_web
from tests.conftest import Home, finished, wait_for, waiting
from tests.web.test_web import web

CONFIG = scripted_home(["notify", "ask", "finish"], rules='notify = "approve"')


async def proposed(home: Home, serve: Any, reply: dict[str, Any]) -> tuple[int, int]:
    home.write_config(with_web(CONFIG), [reply, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    return run_id, item.item_id


def bot(home: Home) -> httpx.AsyncClient:
    """A chat-ops bot: the API with the home's token, no browser, no session."""
    c = web(home)
    c.headers["Authorization"] = f"Bearer {home.paths.api_token.read_text().strip()}"
    return c


async def test_web_api_approve_runs_the_action(home: Home, serve: Any) -> None:
    run_id, item_id = await proposed(home, serve, act("notify", "tell them", message="hi"))
    async with bot(home) as c:
        r = await c.post(f"/api/inbox/{item_id}/approve", json={"note": "from chat"})
        assert r.status_code == 200, r.text
        assert r.json()["done"] == "approved" and r.json()["item"]["status"] == "approved"
        again = await c.post(f"/api/inbox/{item_id}/approve")
        assert again.status_code == 200 and again.json()["unchanged"] is True
    await wait_for(finished(home, run_id))
    done = home.store.read(lambda c: qi.get_item(c, item_id))
    assert done.status == InboxStatus.CONSUMED and done.answer == "from chat"


async def test_web_api_approve_with_an_edit(home: Home, serve: Any) -> None:
    run_id, item_id = await proposed(home, serve, act("notify", "tell them", message="hi"))
    async with bot(home) as c:
        bad = await c.post(f"/api/inbox/{item_id}/approve", json={"edit": {"message": 5}})
        assert bad.status_code == 400 and "message" in bad.json()["error"]
        assert bad.json()["error"].startswith("the edited arguments: "), bad.json()  # no CLI flag
        r = await c.post(f"/api/inbox/{item_id}/approve", json={"edit": {"message": "edited"}})
        assert r.status_code == 200 and r.json()["done"] == "approved-edited"
    await wait_for(finished(home, run_id))
    assert home.store.read(lambda c: qi.get_item(c, item_id)).args == {"message": "edited"}


async def test_web_api_deny_then_refuses_an_approval(home: Home, serve: Any) -> None:
    _, item_id = await proposed(home, serve, act("notify", "tell them", message="hi"))
    async with bot(home) as c:
        r = await c.post(f"/api/inbox/{item_id}/deny", json={"reason": "not during the freeze"})
        assert r.status_code == 200 and r.json()["done"] == "denied"
        late = await c.post(f"/api/inbox/{item_id}/approve")
        assert late.status_code == 409 and "denied" in late.json()["error"]
    done = home.store.read(lambda c: qi.get_item(c, item_id))
    assert done.status == InboxStatus.DENIED and done.answer == "not during the freeze"


async def test_web_api_answer_and_dismiss(home: Home, serve: Any) -> None:
    run_id, item_id = await proposed(home, serve, act("ask", "need it", question="which region?"))
    notice = home.store.write(lambda c: qi.post(c, InboxKind.NOTICE, title="fyi"))
    async with bot(home) as c:
        wrong = await c.post(f"/api/inbox/{item_id}/answer", json={"answer": 3})
        assert wrong.status_code == 400
        r = await c.post(f"/api/inbox/{item_id}/answer", json={"answer": "eu-west-1"})
        assert r.status_code == 200 and r.json()["item"]["answer"] == "eu-west-1"
        d = await c.post(f"/api/inbox/{notice}/dismiss", json={"reason": "seen"})
        assert d.status_code == 200 and d.json()["done"] == "dismissed"
        not_a_notice = await c.post(f"/api/inbox/{item_id}/dismiss")
        assert not_a_notice.status_code == 409
    await wait_for(finished(home, run_id))
    assert home.store.read(lambda c: qi.get_item(c, notice)).status == InboxStatus.DISMISSED


async def test_web_api_refuses_bad_requests(home: Home, serve: Any) -> None:
    _, item_id = await proposed(home, serve, act("notify", "tell them", message="hi"))
    async with web(home) as anonymous:
        r = await anonymous.post(f"/api/inbox/{item_id}/approve")
        assert r.status_code == 401  # no token, no decision (a page's session key is no token)
        assert r.json()["error"].startswith("a Bearer token is required"), r.json()
        anonymous.headers["Authorization"] = "Bearer not-the-token"
        wrong = await anonymous.post(f"/api/inbox/{item_id}/approve")
        assert wrong.status_code == 401 and "is not the daemon's" in wrong.json()["error"]
    async with bot(home) as c:
        assert (await c.post(f"/api/inbox/{item_id}/launch")).status_code == 400
        junk = await c.post(f"/api/inbox/{item_id}/deny", content=b"{not json")
        assert junk.status_code == 400 and "not JSON" in junk.json()["error"]
        missing = await c.post("/api/inbox/9999/approve")
        assert missing.status_code == 404 and "9999" in missing.json()["error"]
    assert home.store.read(lambda c: qi.get_item(c, item_id)).status == InboxStatus.OPEN
