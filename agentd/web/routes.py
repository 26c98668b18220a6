"""The web inbox's routes: login, the inbox, an item (with its forms), goals, a run. Reads and
writes run in a thread over a short-lived SyncStore (agentd/web/data.py, the CLI's code paths);
after a write the daemon is told at once (`changed`): the scheduler wakes the run, pages update."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentd.config import Config
from agentd.db.store import SyncStore
from agentd.errors import AgentdError, NotFound
from agentd.models import utcnow
from agentd.web import auth, data, html

T = TypeVar("T")
COOKIE_MAX_AGE_S = 30 * 86400


class Site:
    """What the pages need from the daemon: the database's path, the config as it is now (a
    reload swaps it), the token, and whom to tell about a write."""

    def __init__(
        self, db: Path, config: Callable[[], Config], secret: str, changed: Callable[[], None]
    ) -> None:
        self.db = db
        self.config = config
        self.secret = secret
        self.changed = changed

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            store = SyncStore(self.db)
            try:
                return fn(store, *args)
            finally:
                store.close()

        return await asyncio.to_thread(run)

    def logged_in(self, request: Request) -> bool:
        return auth.same(request.cookies.get(auth.COOKIE), auth.session_value(self.secret))


def _site(request: Request) -> Site:
    site = request.app.state.site
    assert isinstance(site, Site)
    return site


async def login_form(request: Request) -> Response:
    given = request.query_params.get("token")
    if given is None:
        return HTMLResponse(html.login_page())
    return _login(request, given)


async def login_post(request: Request) -> Response:
    form = await request.form()
    return _login(request, str(form.get("token", "")))


def _login(request: Request, given: str) -> Response:
    site = _site(request)
    if not auth.same(given.strip(), site.secret):
        return HTMLResponse(html.login_page("That token is not this daemon's."), status_code=403)
    # 303: the token leaves the address bar (and the history) for the inbox.
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        auth.COOKIE, auth.session_value(site.secret), max_age=COOKIE_MAX_AGE_S,
        httponly=True, samesite="strict", path="/",
    )  # fmt: skip
    return response


async def inbox_page(request: Request) -> Response:
    show_all = request.query_params.get("all") == "1"
    items = await _site(request).call(lambda s: data.inbox_items(s, show_all=show_all))
    flash = request.query_params.get("done", "")
    return HTMLResponse(html.inbox_page(items, utcnow(), show_all=show_all, flash=flash))


async def item_page(request: Request, error: str = "", status: int = 200) -> Response:
    site = _site(request)
    item_id = int(request.path_params["item_id"])
    cfg = site.config()

    def read(store: SyncStore) -> Any:
        item, goal = data.item_with_goal(store, item_id)
        return item, goal, data.arg_fields(store, cfg, item)

    item, goal, fields = await site.call(read)
    flash = request.query_params.get("done", "")
    body = html.item_page(
        item, goal, fields, data.evidence(item), utcnow(), flash=flash, error=error
    )
    return HTMLResponse(body, status_code=status)


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
        return await item_page(request, error=str(e), status=400)
    site.changed()
    return RedirectResponse(f"/items/{item_id}?done={quote(done)}", status_code=303)


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
    Route("/", inbox_page, methods=["GET"]),
    Route("/items/{item_id:int}", item_page, methods=["GET"]),
    Route("/items/{item_id:int}/{verb}", item_act, methods=["POST"]),
    Route("/goals", goals_page, methods=["GET"]),
    Route("/goals/{goal_id:int}", goal_page, methods=["GET"]),
    Route("/runs/{run_id:int}", run_page, methods=["GET"]),
]
PUBLIC = frozenset({"/login"})
