"""The service-watch scenario against a REAL model: SmolLM2-135M-Instruct behind llama-cpp-python's
OpenAI-compatible server (tests/llm/llama_server.py), no proxy in between. The model is as dumb as
models come; the test asks only that the harness carries it to an approval of the gated rollback
(the server refusing json_schema is probed past, replies are validated, claimed successes while
/health fails are not trusted) — and that nothing gated ran without that approval."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from agentd.db import items as qi
from agentd.db import queries as q
from agentd.models import InboxKind, StepKind
from tests.conftest import Home, ServeHttp, wait_for
from tests.llm.llama_server import CONTEXT_TOKENS, llama_url  # noqa: F401  # a fixture

pytestmark = pytest.mark.timeout(1800)

# The context agentd builds prompts for, below the server's CONTEXT_TOKENS: prompts are made
# compact (dense menu, each source cut to its share) so a loaded 2-core machine reads the first
# decision in tens of seconds, not minutes; the server's own context keeps room to spare.
PROMPT_CONTEXT_TOKENS = 1024

CONFIG = """
[daemon]
poll_interval_s = 0.2

[models.default]
provider = "openai"
model = "smollm2"
base_url = "__LLAMA__"
timeout_s = 600
max_tokens = 200
context_tokens = __CTX__

[sources.health]
type = "http"
url = "__SERVICE__/health"
timeout_s = 2.0

[actions.rollback]
type = "command"
description = "Roll the service back to its previous version (fixes a bad deploy)."
argv = ["sh", "-c", "echo rolled back >> __OUT__"]

[agents.watch]
description = "Keeps the service healthy. A rollback needs the operator's approval."
sources = ["health"]
actions = ["rollback", "notify", "finish"]
triggers = ["health.unhealthy"]
watch = { interval_s = 1.0 }
policy = { rules = { rollback = "approve" } }
limits = { retry_base_s = 1.0, retry_max_s = 10.0, unconfirmed_cooldown_s = 1.0 }

[agents.watch.checkin]
enabled = false
"""


class Down(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_smollm2_service_watch_reaches_an_approval(
    home: Home,
    tmp_path: Path,
    serve: Any,
    http_server: ServeHttp,
    llama_url: str,  # noqa: F811
) -> None:
    out = tmp_path / "rolled.txt"
    text = (
        CONFIG.replace("__LLAMA__", llama_url)
        .replace("__CTX__", str(min(PROMPT_CONTEXT_TOKENS, CONTEXT_TOKENS)))
        .replace("__SERVICE__", http_server(Down))
        .replace("__OUT__", str(out))
    )
    home.write_config(text)
    goal_id = home.add_goal(title="Keep the service healthy", agent="watch")
    await serve()

    def approval() -> Any:
        items = home.store.read(lambda c: qi.list_items(c))
        return next((i for i in items if i.kind == InboxKind.APPROVAL), None)

    # A dumb model may end its run "failed" without proposing the rollback (seen live: it
    # notified and gave up); the watch then leaves that stretch of the outage alone, as the
    # operator was told. The operator starts another run then, as this test does, until the
    # model proposes the rollback.
    def proposed_or_idle() -> bool:
        runs = home.store.read(lambda c: q.list_runs(c))
        return approval() is not None or (bool(runs) and all(r.status.finished for r in runs))

    for _ in range(20):
        await wait_for(proposed_or_idle, timeout_s=1500)
        if approval() is not None:
            break
        home.start_run(goal_id)
    await wait_for(lambda: approval() is not None, timeout_s=1500)
    item = approval()
    assert item.action == "rollback" and item.goal_id == goal_id
    assert not out.exists()  # gated: nothing ran before the approval
    runs = home.store.read(lambda c: q.list_runs(c))
    decided = [s for r in runs for s in home.steps(r.run_id) if s.kind == StepKind.DECIDE]
    assert decided and all(s.data.get("model") for s in decided)
    refusals = [i for i in home.store.read(lambda c: qi.list_items(c)) if i.rule == "model_refused"]
    assert not refusals, refusals[0].body if refusals else ""
