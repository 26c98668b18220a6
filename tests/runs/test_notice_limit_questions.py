"""The per-run notice limit never swallows a question because a notice said the same (issue 34,
item 6): a dumb model notifies "the service is down" and then asks about it in nearly the same
words — the notice could not get the operator's answer, so the question is posted."""

from __future__ import annotations

import pytest

from agentd.db import items as qi
from agentd.models import InboxKind, StepKind, Verdict
from tests.configs import act, scripted_home
from tests.conftest import Home, wait_for

pytestmark = pytest.mark.backends

SAID = "the service is down, please check the service"


async def test_a_question_repeating_a_notice_reaches_the_operator(
    home: Home, serve: object
) -> None:
    replies = [act("notify", message=SAID), act("ask", question=SAID + "?")]
    home.write_config(scripted_home(["notify", "ask", "finish"]), replies)
    run_id = home.start_run(home.add_goal())
    await serve()  # type: ignore[operator]

    def question() -> list[qi.InboxItem]:
        items = home.store.read(lambda c: qi.list_items(c, status=None, run_id=run_id))
        return [i for i in items if i.kind == InboxKind.QUESTION]

    await wait_for(lambda: bool(question()), 30)
    assert question()[0].title.startswith("the service is down")
    denied = [
        s for s in home.steps(run_id) if s.kind == StepKind.CHECK and s.verdict == Verdict.DENY
    ]
    assert not denied, denied[0].data
