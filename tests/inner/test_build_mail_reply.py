"""A reply written by the inner loop: the run decides to `build` a reply and gives its message_id,
recipients and subject (deliver_args); the build drafts, judges and revises the body, and its
delivery is mail_reply with that body, checked by the harness like any action — here a draft read
back from Dovecot's Drafts over IMAP. The run cannot give the body itself: the artifact's wins."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.models import RunStatus, StepKind
from tests.conftest import Home, finished, wait_for
from tests.dovecot import imap_source
from tests.dovecot_server import Dovecot
from tests.inner.test_build import PLAN, draft, verdict
from tests.mail_support import folder

pytestmark = [pytest.mark.timeout(120)]
BODY = "Hi Bob,\n\nTuesday at 10 works for me.\n\nAnn"


async def test_a_reply_body_built_by_the_inner_loop_is_saved_as_a_draft(
    home: Home, serve: Any, dovecot: Dovecot
) -> None:
    given = {"message_id": "<q@example.com>", "to": ["bob@example.com"],
             "subject": "Re: meeting", "body": "the run's own text, never sent"}  # fmt: skip
    home.write_config(
        "[daemon]\npoll_interval_s = 0.05\n\n"
        '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
        + imap_source(dovecot)
        + '[actions.reply]\ntype = "mail_reply"\nsource = "inbox"\n\n'
        '[agents.default]\nactions = ["build", "reply", "finish"]\n\n'
        '[agents.default.build]\ndeliver = "reply"\ndeliver_param = "body"\nmax_revisions = 2\n',
        replies={  # type: ignore[arg-type]
            "decide": [
                {"reason": "bob asks for a time", "action": {"kind": "build",
                 "request": "a reply to Bob proposing Tuesday at 10",
                 "requirements": ["names Tuesday at 10"], "deliver_args": given}},
                {"reason": "reply under way", "action": {"kind": "finish",
                 "outcome": "succeeded", "summary": "reply drafted"}},
            ],
            "plan": [PLAN],
            "generate": [draft("Hi Bob, any time."), draft(BODY)],
            "judge": [verdict("R1", n=1), verdict(n=1)],
        },
    )  # fmt: skip
    goal = home.add_goal(title="answer bob")
    run = home.start_run(goal)
    await serve()
    await wait_for(finished(home, run))
    act = next(s for s in home.steps(run) if s.kind == StepKind.ACT)
    build = int(act.result["build_run"])
    await wait_for(finished(home, build))
    assert home.run(build).status == RunStatus.SUCCEEDED, home.run(build).summary
    delivered = next(s for s in home.steps(build) if s.kind == StepKind.ACT)
    assert delivered.action == "reply"
    assert delivered.args == {**given, "body": BODY, "send": False}
    (saved,) = await folder(dovecot, "Drafts")
    assert saved["subject"] == "Re: meeting" and saved["to"] == ["bob@example.com"]
    assert saved["in_reply_to"] == "<q@example.com>"
    assert saved["excerpt"].strip() == BODY
