"""The web inbox's routes: login and logout, the inbox, an item (with its forms), goals, a run.
Reads and writes run in a thread over a short-lived store (agentd/web/data.py, the CLI's code
paths); after a write the daemon is told at once (`changed`): the scheduler wakes the run, pages
update. A login opens a session of its own (agentd/operator/sessions.py) and hands its signing
key to the page's script, which signs each request after `/prove` showed it is agentd
(web/proof.py); logout ends it. Every form ends in a redirect (POST-redirect-GET) to a page whose
flash box shows what that form did, under a key the daemon handed out (agentd/web/flash.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agentd.config import Config
from agentd.errors import AgentdError, NotFound
from agentd.operator import home, sessions
from agentd.web import auth, bodies, data, edit, flash, html, proof
from agentd.web import goal_page as goal_view
from agentd.web import inbox_page as inbox_view
from agentd.web import item_page as item_view
from agentd.web import run_page as run_view
from agentd.web.ids import number as is_id

T = TypeVar("T")
# Login and logout answers carry the token or the key: never kept by a cache or the history.
NO_STORE = {"Cache-Control": "no-store"}
SESSION = "web_session"  # the request state's key for the id of the session the guard checked


class Site:
    """What the pages need from the daemon: the database's path, the config as it is now (a
    reload swaps it), the token (read again when its file changes), whom to tell about a write,
    and the details of recent errors (`notes`) for the pages the browser is sent back to."""

    def __init__(
        self, db: Path, config: Callable[[], Config], token: auth.Token, changed: Callable[[], None]
    ) -> None:
        self.db = db
        self.config = config
        self.token = token
        self.changed = changed
        self.notes = flash.Notes()
        self.challenges = proof.Challenges()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            # No poke of our own socket: a page's write calls `changed` (the scheduler looks).
            store = home.open_store(self.db, poke=False)
            try:
                return fn(store, *args)
            finally:
                store.close()

        return await asyncio.to_thread(run)

    async def call_at(self, fn: Callable[..., T], *args: Any) -> tuple[T, datetime]:
        """`call`, and the home's now read on the same store: what the page's "5m ago" counts
        from (a simulated clock's, under `serve --clock-speed`; never the wall beside it)."""
        return await self.call(lambda store: (fn(store, *args), home.now(store)))

    @property
    def secret(self) -> str:
        return self.token.current()

    async def session(self, signed: proof.Signed, method: str, target: str) -> int | None:
        """The id of the live session that signed this request, or None: a challenge not handed
        out for it (or used already), a session not live, a signature that does not match."""
        if not self.challenges.good(signed.challenge, signed.session_id):
            return None
        found = await self.call(sessions.check, signed.session_id, self.secret)
        if found is None or not signed.valid(found[1], method, target):
            return None
        if not self.challenges.take(signed.challenge, signed.session_id):
            return None  # the same request, sent twice at once: only one of them counts
        await self.call(sessions.used, found[0])
        return found[0].session_id

    def note(self, path: str, text: str, *, failed: bool = False) -> str:
        """`path` with the query whose `note` shows `text` in the flash box of that page."""
        key = self.notes.add(path.partition("?")[0], text, failed=failed)
        return f"{path}{'&' if '?' in path else '?'}{urlencode({'note': key})}"


def _site(request: Request) -> Site:
    site = request.app.state.site
    assert isinstance(site, Site)
    return site


async def login_form(request: Request) -> Response:
    query = request.query_params
    next_path = auth.local_path(query.get("next"))
    given = query.get("token")
    if given is None:
        done, _ = _site(request).notes.shown(query, "/login")
        return HTMLResponse(html.login_page(next_path=next_path, flash=done), headers=NO_STORE)
    return await _login(request, given, next_path)


async def login_post(request: Request) -> Response:
    form = await bodies.form(request)
    next_path = auth.local_path(str(form.get("next", "")))
    return await _login(request, str(form.get("token", "")), next_path)


async def _login(request: Request, given: str, next_path: str) -> Response:
    site = _site(request)
    secret = site.secret
    if not auth.same(given.strip(), secret):
        page = html.login_page("That token is not this daemon's.", next_path=next_path)
        return HTMLResponse(page, status_code=403, headers=NO_STORE)
    key = await site.call(sessions.login, secret, request.headers.get("user-agent", ""))
    # The page's script keeps the key, then opens the page asked for in place of this one:
    # the token leaves the address bar and the history.
    response = HTMLResponse(html.logged_in_page(key, next_path), headers=NO_STORE)
    response.delete_cookie(auth.LEGACY_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def prove(request: Request) -> Response:
    """`/prove?session=ID&nonce=N`: agentd shows a page it holds the session's key (the HMAC of
    the page's nonce and a fresh challenge), and hands out the challenge its request signs."""
    site = _site(request)
    session, nonce = request.query_params.get("session", ""), request.query_params.get("nonce", "")
    if not session.isdigit() or len(session) > 18 or not proof.NONCE.fullmatch(nonce):
        return JSONResponse({"error": "`session` is a number and `nonce` 16-64 hex digits"}, 400)
    found = await site.call(sessions.check, int(session), site.secret)
    if found is None:
        return JSONResponse({"error": "log in first"}, 401, headers=NO_STORE)
    challenge = site.challenges.issue(int(session))
    answer = {"challenge": challenge, "proof": proof.daemon_proof(found[1], nonce, challenge)}
    return JSONResponse(answer, headers=NO_STORE)


async def logout(request: Request) -> Response:
    """End this browser's session (a POST, behind the same cross-site refusal as any form)."""
    site = _site(request)
    await site.call(sessions.logout, request.scope["state"][SESSION])
    login = site.note("/login", flash.DONE["logged-out"])
    return HTMLResponse(html.logged_out_page(login), headers=NO_STORE)


async def inbox_page(request: Request) -> Response:
    site = _site(request)
    done, error = site.notes.shown(request.query_params, "/")
    try:
        filters = inbox_view.Filters.parse(request.query_params)
    except AgentdError as e:  # a hand-edited address: said, and the open items shown
        filters, error = inbox_view.Filters(), f"Not shown as asked: {e}"
    (around, goals, held), now = await site.call_at(
        lambda s: (*data.inbox_paged(s, filters.shared, filters.after, filters.limit),
                   data.held_line(s))
    )  # fmt: skip
    page = inbox_view.inbox_page(
        around.page.rows, goals, filters, now, flash=done, error=error, held=held,
        pager=inbox_view.Pager.of(around, filters),
    )  # fmt: skip
    return HTMLResponse(page)


async def item_page(request: Request) -> Response:
    site = _site(request)
    item_id = int(request.path_params["item_id"])
    cfg = site.config()

    def read(store: home.HomeStore) -> Any:
        item, goal = data.item_with_goal(store, item_id)
        return item, goal, edit.arg_fields(store, cfg, item), data.item_evidence(store, item)

    (item, goal, fields, evidence), now = await site.call_at(read)
    done, error = site.notes.shown(request.query_params, request.url.path)
    body = item_view.item_page(
        item, goal, fields, evidence, data.evidence(item), now, flash=done, error=error
    )
    return HTMLResponse(body)


async def _form(request: Request) -> dict[str, str]:
    return {k: str(v) for k, v in (await bodies.form(request)).items() if k != "_auth"}


async def _done(request: Request, page: str, work: Callable[[home.HomeStore], Any]) -> Response:
    """Run one write, then send the browser to `page` with a flash of what it did (or why not)."""
    site = _site(request)
    try:
        done = await site.call(work)
    except NotFound:
        raise
    except AgentdError as e:  # refused, unchanged, a bad edit: said on the page
        return RedirectResponse(site.note(page, flash.error_text(e), failed=True), status_code=303)
    site.changed()
    return RedirectResponse(site.note(page, flash.done_text(done)), status_code=303)


async def item_act(request: Request) -> Response:
    item_id = int(request.path_params["item_id"])
    verb = str(request.path_params["verb"])
    form = await _form(request)
    cfg = _site(request).config()
    return await _done(request, f"/items/{item_id}",
                       lambda s: data.act(s, cfg, item_id, verb, form))  # fmt: skip


async def dismiss_many(request: Request) -> Response:
    """The inbox's bulk dismissal: the ticked notices, or all those the page showed."""
    form = await bodies.form(request)
    picked = (
        form.getlist("item")
        if form.get("scope") != "all"
        else str(form.get("shown", "")).split(",")
    )
    ids = [int(v) for v in map(str.strip, map(str, picked)) if is_id(v)]
    back = inbox_view.way_back(str(form.get("back", "/")))  # the page it was made on
    if not ids:
        site = _site(request)
        text = "Nothing dismissed: tick the notices to dismiss, or use Dismiss all."
        return RedirectResponse(site.note(back, text, failed=True), status_code=303)
    return await _done(request, back, lambda s: data.dismiss_many(s, ids))


async def goal_act(request: Request) -> Response:
    goal_id = int(request.path_params["goal_id"])
    verb = str(request.path_params["verb"])
    form = await _form(request)
    cfg = _site(request).config()
    return await _done(request, f"/goals/{goal_id}",
                       lambda s: data.goal_act(s, cfg, goal_id, verb, form))  # fmt: skip


async def old_item_link(request: Request) -> Response:
    """/inbox/ID, the item link of notifications sent before it became /items/ID."""
    return RedirectResponse(f"/items/{int(request.path_params['item_id'])}", status_code=301)


async def goals_page(request: Request) -> Response:
    found, now = await _site(request).call_at(data.all_goals)
    return HTMLResponse(goal_view.goals_page(found, now))


async def goal_page(request: Request) -> Response:
    site = _site(request)
    goal_id = int(request.path_params["goal_id"])
    cfg = site.config()
    (goal, runs, outlook, open_items), now = await site.call_at(
        lambda s: data.goal_outlook(s, cfg, goal_id)
    )
    done, error = site.notes.shown(request.query_params, request.url.path)
    page = goal_view.goal_page(goal, runs, outlook, open_items, now, flash=done, error=error)
    return HTMLResponse(page)


async def run_page(request: Request) -> Response:
    run_id = int(request.path_params["run_id"])
    (run, goal, steps), now = await _site(request).call_at(lambda s: data.run_steps(s, run_id))
    return HTMLResponse(run_view.run_page(run, goal, steps, now))


ROUTES = [
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login_post, methods=["POST"]),
    Route("/prove", prove, methods=["GET"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/", inbox_page, methods=["GET"]),
    Route("/items/{item_id:id}", item_page, methods=["GET"]),
    Route("/items/{item_id:id}/{verb}", item_act, methods=["POST"]),
    Route("/dismiss", dismiss_many, methods=["POST"]),
    Route("/goals/{goal_id:id}/{verb}", goal_act, methods=["POST"]),
    Route("/inbox/{item_id:id}", old_item_link, methods=["GET"]),
    Route("/goals", goals_page, methods=["GET"]),
    Route("/goals/{goal_id:id}", goal_page, methods=["GET"]),
    Route("/runs/{run_id:id}", run_page, methods=["GET"]),
]
PUBLIC = frozenset({"/login", "/prove"})
