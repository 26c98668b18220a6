"""Who may scrape `GET /metrics`: with `[metrics] token_env`, only the bearer of that token — a
live web session's signed request, its key and the API's own token are refused; without it,
loopback clients only (a remote client is refused); with metrics off, nobody. And no label carries
a goal title or event data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import PlainTextResponse

from agentd import config
from agentd.api import metrics
from agentd.config import Paths
from agentd.db.store import SyncStore
from agentd.models import InboxKind
from agentd.operator import sessions
from agentd.runs.deps import Deps
from agentd.web import auth, keys
from tests.telemetry.homes import TITLE, MetricsHome
from tests.web.signed import Signed

TOKEN = "scrape-token-0123456789"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[MetricsHome]:
    # The pages on too: a live session's signed request must be one the pages accept.
    metrics_on = 'enabled = true\ntoken_env = "AGENTD_TEST_METRICS_TOKEN"'
    h = MetricsHome(tmp_path / "home", metrics_on, tables="[web]\nenabled = true\n\n")
    try:
        yield h
    finally:
        h.stop()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_metrics_token_opens_it_and_a_session_key_or_the_api_token_does_not(
    home: MetricsHome,
) -> None:
    home.serve(env={"AGENTD_TEST_METRICS_TOKEN": TOKEN})
    api_token = auth.Token(Paths(home.root).api_token).current()
    store = SyncStore(Paths(home.root).db)
    try:
        session = sessions.login(store, api_token, "test")  # what a login hands the page: ID.KEY
    finally:
        store.close()
    assert home.get().status_code == 401
    # Signed as the page signs (web/proof.py): the same session's request opens a page, not this.
    with httpx.Client(base_url=f"http://127.0.0.1:{home.port}", auth=Signed(session),
                      timeout=30) as page:  # fmt: skip
        assert page.get("/").status_code == 200  # a live session, its signature accepted
        refused = page.get("/metrics")
    assert keys.HEADER in refused.request.headers  # it went signed (agentd proved itself)
    assert refused.status_code == 401, refused.text
    assert home.get(Authorization=f"Bearer {session.split('.')[1]}").status_code == 401
    assert home.get(Authorization=f"Bearer {api_token}").status_code == 401
    assert home.get(Authorization=f"Bearer {TOKEN}x").status_code == 401
    ok = home.get(Authorization=f"Bearer {TOKEN}")
    assert ok.status_code == 200, ok.text
    assert "agentd_runs" in ok.text and ok.headers["content-type"].startswith("text/plain")
    # The token opens /metrics only: the JSON API still wants its own token.
    assert home.get("/api/goals", Authorization=f"Bearer {TOKEN}").status_code == 401


def _deps(tmp_path: Path, toml: str) -> tuple[Deps, Any]:
    from agentd.db.store import Store

    (tmp_path / "config.toml").write_text(toml)
    cfg = config.load(tmp_path / "config.toml")
    store = Store(tmp_path / "agentd.db")
    return Deps(config=cfg, store=store, models={}, executors={}, sources={}, owner="t"), store


async def _get(deps: Deps, client: tuple[str, int], host: str = "127.0.0.1:8765") -> httpx.Response:
    async def rest(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("the rest of the API", 418)(scope, receive, send)

    transport = httpx.ASGITransport(app=metrics.before(rest, deps), client=client)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{host}") as http:
        return await http.get("/metrics")


async def test_metrics_refuse_a_remote_client_without_a_token(tmp_path: Path) -> None:
    deps, store = _deps(tmp_path, "[metrics]\nenabled = true\n")
    await store.open()
    try:
        assert (await _get(deps, ("127.0.0.1", 40000))).status_code == 200
        assert (await _get(deps, ("::1", 40000), "localhost:8765")).status_code == 200
        remote = await _get(deps, ("10.1.2.3", 40000))
        assert remote.status_code == 403 and "token_env" in remote.text
        # A loopback client sent by a page elsewhere (DNS rebinding: a foreign Host) is refused.
        assert (await _get(deps, ("127.0.0.1", 40000), "evil.example:8765")).status_code == 403
    finally:
        await store.close()


async def test_metrics_off_is_not_found(tmp_path: Path) -> None:
    deps, store = _deps(tmp_path, "")
    await store.open()
    try:
        assert (await _get(deps, ("127.0.0.1", 40000))).status_code == 404
    finally:
        await store.close()


async def test_no_label_carries_a_goal_title_or_event_data(tmp_path: Path) -> None:
    """Goals, runs, nudges and items of an agent the config does not name: the title, the event
    data and the unknown agent's name appear nowhere; the agent's label is `other`."""
    from agentd.db import items as qi
    from agentd.db import queries as q

    deps, store = _deps(tmp_path, "[metrics]\nenabled = true\n")
    await store.open()
    try:

        def arrange(c: Any) -> None:
            goal_id = q.add_goal(c, title=TITLE, why="x", agent="ghost-agent-x", criteria=[],
                                 deadline=None)  # fmt: skip
            run_id = q.create_run(c, goal_id=goal_id, agent="ghost-agent-x", trigger="test")
            qi.post(c, InboxKind.APPROVAL, title=TITLE, goal_id=goal_id, run_id=run_id,
                    body="Zanzibar event data", data={"event": "Zanzibar"})  # fmt: skip
            qi.post(c, InboxKind.NOTICE, title=TITLE, goal_id=goal_id, rule="nudge",
                    data={"nudge": {"topic": "Zanzibar"}})  # fmt: skip

        await store.write(arrange)
        body = (await _get(deps, ("127.0.0.1", 40000))).text
        assert "Zanzibar" not in body and "ghost-agent-x" not in body
        assert 'agentd_runs{agent="other",status="running"} 1.0' in body
    finally:
        await store.close()
