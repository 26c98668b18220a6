"""The operator's decisions over HTTP (httpx against the daemon's app on its unix socket): approve
as proposed (a multi-line string, an optional argument the model left out), an untouched edit
form, a real edit, edit errors worded for the page, a value with control characters kept read-only,
deny with a reason, dismiss, accept a nudge — each ending in a redirect to the item's page."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from agentd.db import items as qi
from agentd.models import InboxItem, InboxKind, InboxStatus
from tests.configs import FINISH, act, scripted_home, with_web
from tests.conftest import Home, finished, wait_for, waiting
from tests.web.test_web import SAME, login, web

CONFIG = scripted_home(["notify", "sleep", "finish"], rules='notify = "approve", sleep = "approve"')
MULTILINE = "line one\nline two\n\n  indented, then a blank line above"
SLEEP = act("sleep", "let it settle", seconds=1)


def notify(message: str) -> dict[str, Any]:
    return act("notify", "tell them", message=message)


async def proposed(home: Home, serve: Any, reply: dict[str, Any]) -> tuple[int, InboxItem]:
    """A daemon whose run waits on the approval of `reply`'s action."""
    home.write_config(with_web(CONFIG), [reply, FINISH])
    run_id = home.start_run(home.add_goal())
    await serve()
    await wait_for(waiting(home, run_id))
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    assert item.kind == InboxKind.APPROVAL
    return run_id, item


class _Form(HTMLParser):
    """What a browser submits for one form of a page left untouched: inputs with their value
    (line breaks stripped, as a browser does for a one-line input), a textarea's text (its first
    newline dropped by the parser, line breaks sent as CRLF), a select's selected option."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id, self.inside, self.fields = form_id, False, {}
        self.textarea: str | None = None
        self.select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or "name" not in a:
            return
        if tag == "input":
            self.fields[a["name"]] = a.get("value", "").replace("\r", "").replace("\n", "")
        elif tag == "textarea":
            self.textarea, self.fields[a["name"]] = a["name"], ""
        elif tag == "select":
            self.select = a["name"]
        elif (
            tag == "option" and self.select and ("selected" in a or self.select not in self.fields)
        ):
            self.fields[self.select] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea" and self.textarea:
            text = self.fields[self.textarea].removeprefix("\n")
            self.fields[self.textarea], self.textarea = text.replace("\n", "\r\n"), None
        elif tag == "select":
            self.select = None

    def handle_data(self, data: str) -> None:
        if self.textarea:
            self.fields[self.textarea] += data


def untouched(page: str, form_id: str) -> dict[str, str]:
    parser = _Form(form_id)
    parser.feed(page)
    return parser.fields


async def page_of(home: Home, item_id: int) -> str:
    async with web(home) as c:
        await login(c, home)
        return (await c.get(f"/items/{item_id}")).text


def get(home: Home, item_id: int) -> InboxItem:
    return home.store.read(lambda c: qi.get_item(c, item_id))


async def post(home: Home, item_id: int, verb: str, form: dict[str, str]) -> tuple[str, str]:
    """Log in, post a form to the item, follow the redirect: (where it went, what it shows)."""
    async with web(home) as c:
        await login(c, home)
        r = await c.post(f"/items/{item_id}/{verb}", data=form, headers=SAME)
        assert r.status_code == 303, r.text
        return r.headers["location"], (await c.get(r.headers["location"])).text


async def test_web_approve_binds_a_multiline_proposal_exactly(home: Home, serve: Any) -> None:
    run_id, item = await proposed(home, serve, notify(MULTILINE))
    form = untouched(await page_of(home, item.item_id), "approve-form")
    where, shown = await post(home, item.item_id, "approve", {**form, "note": "fine"})
    assert where.startswith(f"/items/{item.item_id}?note=")
    assert f"Approved item {item.item_id} as proposed." in shown
    await wait_for(finished(home, run_id))
    done = get(home, item.item_id)
    assert done.status == InboxStatus.CONSUMED and done.answer == "fine"
    assert done.args == {"message": MULTILINE} and done.digest == item.digest
    assert "original_args" not in done.data


async def test_web_approve_leaves_an_omitted_argument_unset(home: Home, serve: Any) -> None:
    run_id, item = await proposed(home, serve, SLEEP)
    form = untouched(await page_of(home, item.item_id), "approve-form")
    _, shown = await post(home, item.item_id, "approve", form)
    assert "as proposed" in shown
    await wait_for(finished(home, run_id))
    done = get(home, item.item_id)
    assert done.args == {"seconds": 1.0} and done.digest == item.digest


async def test_web_untouched_edit_form_approves_as_proposed(home: Home, serve: Any) -> None:
    _, item = await proposed(home, serve, SLEEP)
    form = untouched(await page_of(home, item.item_id), "edit-form")
    # The number as proposed; `until`, left out by the model, empty (not "", not a default).
    assert form == {"arg.seconds": "1.0", "arg.until": "", "note": ""}
    _, shown = await post(home, item.item_id, "approve", form)
    assert "as proposed" in shown
    done = get(home, item.item_id)
    assert done.args == {"seconds": 1.0} and done.digest == item.digest


async def test_web_untouched_edit_form_keeps_a_multiline_string(home: Home, serve: Any) -> None:
    _, item = await proposed(home, serve, notify("\n" + MULTILINE + "\n"))
    form = untouched(await page_of(home, item.item_id), "edit-form")
    assert form["arg.message"] == ("\n" + MULTILINE + "\n").replace("\n", "\r\n")
    _, shown = await post(home, item.item_id, "approve", form)
    assert "as proposed" in shown
    assert get(home, item.item_id).digest == item.digest


async def test_web_edit_changes_only_what_differs(home: Home, serve: Any) -> None:
    run_id, item = await proposed(home, serve, notify(MULTILINE))
    edited = "line one\r\nline 2"  # as a browser sends a textarea: CRLF
    _, shown = await post(home, item.item_id, "approve", {"arg.message": edited, "note": ""})
    assert "with your edits" in shown
    await wait_for(finished(home, run_id))
    done = get(home, item.item_id)
    assert done.args == {"message": "line one\nline 2"} and done.digest != item.digest
    assert done.data["original_args"] == {"message": MULTILINE}


async def test_web_edit_errors_are_worded_for_the_page(home: Home, serve: Any) -> None:
    _, item = await proposed(home, serve, SLEEP)
    both_unset = {"arg.seconds": "", "arg.until": ""}
    where, shown = await post(home, item.item_id, "approve", both_unset)
    assert where.startswith(f"/items/{item.item_id}?note=")
    assert "Not done: what was entered is not valid." in shown
    assert "the edited arguments were not approved" in shown and "exactly one of" in shown
    _, bad_number = await post(home, item.item_id, "approve", {"arg.seconds": "soon"})
    assert "seconds: &#x27;soon&#x27; is not valid number" in bad_number
    for text in (shown, bad_number):
        assert "--edit" not in text.split("<details")[0]  # the error box names no CLI flag
    assert get(home, item.item_id).status == InboxStatus.OPEN


async def test_web_edit_form_keeps_control_characters_read_only(home: Home, serve: Any) -> None:
    hostile = "restart \x1b[2J\x1b[31mnow \u202eevil"
    run_id, item = await proposed(home, serve, notify(hostile))
    page = await page_of(home, item.item_id)
    assert "\x1b" not in page and "\u202e" not in page
    assert 'name="arg.message"' not in page  # no editable copy of it
    assert "\\x1b[2J\\x1b[31mnow \\u202eevil" in page.split('id="edit"')[1]
    assert f"agentd inbox approve {item.item_id} --edit" in page
    # Even a crafted post cannot change it from the web: the value stays as proposed.
    _, shown = await post(home, item.item_id, "approve", {"arg.message": "other", "note": ""})
    assert "as proposed" in shown
    await wait_for(finished(home, run_id))
    assert get(home, item.item_id).args == {"message": hostile}


async def test_web_deny_with_a_reason(home: Home, serve: Any) -> None:
    run_id, item = await proposed(home, serve, notify("hello"))
    _, shown = await post(home, item.item_id, "deny", {"text": "not during the freeze"})
    assert f"Denied item {item.item_id}; the run is told." in shown
    await wait_for(finished(home, run_id))
    done = get(home, item.item_id)
    assert done.status == InboxStatus.DENIED and done.answer == "not during the freeze"


def notice(home: Home, goal_id: int, data: dict[str, Any] | None = None) -> int:
    rule = "nudge" if data else None
    return home.store.write(
        lambda c: qi.post(
            c,
            InboxKind.NOTICE,
            title="a check-in noticed something",
            goal_id=goal_id,
            rule=rule,
            data=data,
        )
    )


async def test_web_dismiss_a_notice(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    await serve()
    item_id = notice(home, home.add_goal())
    _, shown = await post(home, item_id, "dismiss", {"text": "seen it"})
    assert f"Dismissed item {item_id}." in shown
    assert get(home, item_id).status == InboxStatus.DISMISSED


async def test_web_accept_a_nudge_starts_its_run(home: Home, serve: Any) -> None:
    home.write_config(with_web(CONFIG), [FINISH])
    await serve()
    suggested = {"action": "finish", "args": {"outcome": "succeeded", "summary": "shipped"}}
    nudge = {"nudge": {"topic": "ship", "message": "ship it", "suggested": suggested}}
    item_id = notice(home, home.add_goal(), nudge)
    _, shown = await post(home, item_id, "accept", {})
    run_id = get(home, item_id).data["run_id"]
    assert f"Accepted the nudge of item {item_id}: run {run_id} starts." in shown
    await wait_for(finished(home, run_id))
