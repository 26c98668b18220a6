"""The web inbox's routes: login and logout, the inbox, an item (with its forms), goals, a run.
Reads and writes run in a thread over a short-lived store (agentd/web/data.py, the CLI's code
paths); after a write the daemon is told at once (`changed`): the scheduler wakes the run, pages
update. Every form ends in a redirect (POST-redirect-GET) to a page whose flash box shows fixed
wording for the codes in its query string (agentd/web/flash.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentd.config import Config
from agentd.errors import AgentdError, NotFound
from agentd.models import utcnow
from agentd.operator import home
from agentd.web import auth, data, edit, flash, html

T = TypeVar("T")
COOKIE_MAX_AGE_S = 30 * 86400
# Login and logout answers carry the cookie or the token: never kept by a cache or the history.
NO_STORE = {"Cache-Control": "no-store"}


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

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            # No poke of our own socket: a page's write calls `changed` (the scheduler looks).
            store = home.open_store(self.db, poke=False)
            try:
                return fn(store, *args)
            finally:
                store.close()

        return await asyncio.to_thread(run)

    @property
    def secret(self) -> str:
        return self.token.current()


def _site(request: Request) -> Site:
    site = request.app.state.site
    assert isinstance(site, Site)
    return site


async def login_form(request: Request) -> Response:
    query = request.query_params
    next_path = auth.local_path(query.get("next"))
    given = query.get("token")
    if given is None:
        page = html.login_page(next_path=next_path, flash=flash.done_text(query))
        return HTMLResponse(page, headers=NO_STORE)
    return _login(request, given, next_path)


async def login_post(request: Request) -> Response:
    form = await request.form()
    return _login(request, str(form.get("token", "")), auth.local_path(str(form.get("next", ""))))


def _login(request: Request, given: str, next_path: str) -> Response:
    site = _site(request)
    if not auth.same(given.strip(), site.secret):
        page = html.login_page("That token is not this daemon's.", next_path=next_path)
        return HTMLResponse(page, status_code=403, headers=NO_STORE)
    # 303: the token leaves the address bar (and the history) for the page that was asked for.
    response = RedirectResponse(next_path, status_code=303, headers=NO_STORE)
    response.set_cookie(
        auth.COOKIE, auth.session_value(site.secret), max_age=COOKIE_MAX_AGE_S,
        httponly=True, samesite="strict", path="/",
    )  # fmt: skip
    return response


async def logout(request: Request) -> Response:
    """Forget this browser's session (a POST, behind the same cross-site refusal as any form)."""
    response = RedirectResponse("/login?done=logged-out", status_code=303, headers=NO_STORE)
    response.delete_cookie(auth.COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def inbox_page(request: Request) -> Response:
    show_all = request.query_params.get("all") == "1"
    items = await _site(request).call(lambda s: data.inbox_items(s, show_all=show_all))
    done = flash.done_text(request.query_params)
    return HTMLResponse(html.inbox_page(items, utcnow(), show_all=show_all, flash=done))


async def item_page(request: Request) -> Response:
    site = _site(request)
    item_id = int(request.path_params["item_id"])
    cfg = site.config()

    def read(store: home.HomeStore) -> Any:
        item, goal = data.item_with_goal(store, item_id)
        return item, goal, edit.arg_fields(store, cfg, item)

    item, goal, fields = await site.call(read)
    query = request.query_params
    body = html.item_page(
        item, goal, fields, data.evidence(item), utcnow(),
        flash=flash.done_text(query), error=site.notes.error_text(query),
    )  # fmt: skip
    return HTMLResponse(body)


async def item_act(request: Request) -> Response:
    site = _site(request)
    item_id = int(request.path_params["item_id"])
    verb = str(request.path_params["verb"])
    form = {k: str(v) for k, v in (await request.form()).items()}
    try:
        done = await site.call(data.act, site.config(), item_id, verb, form)
    except NotFound:
        raise
    except AgentdError as e:  # refused, unchanged, a bad edit: said on the item's page
        failed = {"error": flash.error_code(e), "note": site.notes.add(str(e))}
        return RedirectResponse(f"/items/{item_id}?{urlencode(failed)}", status_code=303)
    site.changed()
    return RedirectResponse(f"/items/{item_id}?{urlencode(done)}", status_code=303)


async def old_item_link(request: Request) -> Response:
    """/inbox/ID, the item link of notifications sent before it became /items/ID."""
    return RedirectResponse(f"/items/{int(request.path_params['item_id'])}", status_code=301)


async def goals_page(request: Request) -> Response:
    found = await _site(request).call(data.all_goals)
    return HTMLResponse(html.goals_page(found, utcnow()))


async def goal_page(request: Request) -> Response:
    site = _site(request)
    goal_id = int(request.path_params["goal_id"])
    cfg = site.config()
    goal, runs, outlook = await site.call(lambda s: data.goal_outlook(s, cfg, goal_id))
    return HTMLResponse(html.goal_page(goal, runs, outlook, utcnow()))


async def run_page(request: Request) -> Response:
    run_id = int(request.path_params["run_id"])
    run, goal, steps = await _site(request).call(lambda s: data.run_steps(s, run_id))
    return HTMLResponse(html.run_page(run, goal, steps, utcnow()))


ROUTES = [
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login_post, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/", inbox_page, methods=["GET"]),
    Route("/items/{item_id:int}", item_page, methods=["GET"]),
    Route("/items/{item_id:int}/{verb}", item_act, methods=["POST"]),
    Route("/inbox/{item_id:int}", old_item_link, methods=["GET"]),
    Route("/goals", goals_page, methods=["GET"]),
    Route("/goals/{goal_id:int}", goal_page, methods=["GET"]),
    Route("/runs/{run_id:int}", run_page, methods=["GET"]),
]
PUBLIC = frozenset({"/login"})
