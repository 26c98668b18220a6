"""A `model_refused` question answered while the daemon is down is still applied (issue 34,
item 2): the runs it parked wake on the next start and call the model again — the answer is
found by the start's full scan of resolved items, not only by a live notification."""

from __future__ import annotations

from typing import Any

import httpx2

from agentd.models import RunStatus
from agentd.operator import inbox
from tests.configs import FINISH
from tests.conftest import Home, finished, wait_for, waiting
from tests.runs.test_model_refusals import CONFIG, Server, completion, open_refusals, recorded


async def test_a_refusal_answered_while_the_daemon_is_down_wakes_its_runs(
    home: Home, serve: Any
) -> None:
    home.write_config(CONFIG.replace("__MODE__", "json_schema"))
    refusal = recorded("error_500_response_format.json")
    server = Server(lambda r: httpx2.Response(500, json=refusal))
    run_id = home.start_run(home.add_goal())
    first = await serve(models=server.models(home))
    await wait_for(waiting(home, run_id))
    (question,) = open_refusals(home)
    await first.shutdown()

    inbox.answer(home.store, question.item_id, "fixed the server")  # no daemon running
    server.answer = lambda r: completion(FINISH)
    await serve(models=server.models(home))
    await wait_for(finished(home, run_id), 30)
    assert home.run(run_id).status == RunStatus.SUCCEEDED
