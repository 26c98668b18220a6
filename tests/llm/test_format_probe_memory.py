"""The structured-output probe remembers a refused mode at once (issue 34, item 1; seen live on a
loaded 2-core machine): when the next mode's call times out, every retry used to send the refused
`json_schema` again first — one wasted request per retry, and a check-in doing the same."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentd.errors import ModelError
from agentd.llm import ModelRequest
from tests.llm.test_local_server_answers import (  # noqa: F401  # fixtures
    RESTART,
    Make,
    make,
    menu,
    recorded,
    reply,
    request_,
)


async def test_a_refused_mode_is_not_probed_again_after_the_next_one_times_out(
    make: Make,  # noqa: F811
    request_: ModelRequest,  # noqa: F811
) -> None:
    calls = {"json_object": 0}

    def answer(request: httpx2.Request) -> Any:
        fmt = json.loads(request.content).get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return httpx2.Response(500, json=recorded("error_500_response_format.json"))
        calls["json_object"] += 1
        if calls["json_object"] == 1:  # the CPU model is still reading: the client gives up
            raise httpx2.ReadTimeout("timed out", request=request)
        return reply(RESTART)

    provider, server = make(answer)
    with pytest.raises(ModelError):
        await provider.complete(request_)
    second = await provider.complete(request_)
    assert json.loads(second.text)["action"]["kind"] == "restart"
    kinds = [b["response_format"]["type"] for b in server.bodies]
    assert kinds == ["json_schema", "json_object", "json_object"]
