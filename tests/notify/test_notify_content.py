"""What a notification says: an approval proposed by a real run (scripted model, a world source)
reaches the receiver headed by agentd's evidence summary, without its arguments or world;
questions, nudges and notices carry what the operator needs and no more; titles and bodies with
terminal escapes and bidi overrides arrive inert in every channel (webhook, ntfy, email)."""

from __future__ import annotations

import email
import email.policy
import time
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.db import items as qi
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.models import InboxKind
from agentd.notify import subject, text
from agentd.notify.content import QUOTING_QUESTIONS
from agentd.notify.sender import Sender
from agentd.runs.deps import Deps
from tests.conftest import Home, wait_for, waiting
from tests.notify import test_notify
from tests.notify.test_notify import SECRET, Receiver, config_text

# test_notify's fixtures, shared: a webhook receiver, and a migrated home with a Sender on a clock.
receiver, rig = test_notify.receiver, test_notify.rig

ARG_VALUE = "hunter2-do-not-forward"
WORLD_VALUE = "WORLD-7f3a-balance-1234"
REASON = "the balance is low, so move it"

RUN_CONFIG = """
[daemon]
poll_interval_s = 0.02

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.bank]
type = "command"
argv = ["echo", "{world}"]

[actions.transfer]
type = "command"
argv = ["true", "{{account}}"]
params = {{ account = {{ pattern = "^[a-z0-9-]+$" }} }}

[notify.ops]
type = "webhook"
url = "{url}/hook"
secret_env = "AGENTD_TEST_WHSEC"

[agents.default]
actions = ["transfer", "finish"]
sources = ["bank"]
policy = {{ rules = {{ transfer = "approve" }} }}
checkin = {{ quiet = "none" }}

[agents.default.notify]
channels = ["ops"]
on = ["approval"]
"""


async def test_notify_approval_of_a_real_run_carries_no_arguments_or_world(
    home: Home, serve: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_TEST_WHSEC", SECRET)
    proposal = {"reason": REASON, "action": {"kind": "transfer", "account": ARG_VALUE}}
    cfg = home.write_config(
        RUN_CONFIG.format(world=WORLD_VALUE, url=receiver.url), replies=[proposal]
    )
    run_id = home.start_run(home.add_goal(title="keep the balance up"))
    daemon = await serve()
    await wait_for(waiting(home, run_id))
    await daemon.shutdown()
    (item,) = home.store.read(lambda c: qi.list_items(c, status="open"))
    # The inbox item holds the evidence (what acting.py posts) …
    assert ARG_VALUE in item.body and WORLD_VALUE in item.body and REASON in item.body
    # … and the daemon's sender, or this one after it stopped, delivers the notification.
    store = Store(home.paths.db)
    await store.open()
    try:
        deps = Deps(config=cfg, store=store, models={}, executors={}, sources={}, owner="test",
                    clock=ManualClock(time.time()))  # fmt: skip
        for _ in range(3):
            await Sender(deps).tick()
    finally:
        await store.close()
    (got,) = receiver.got
    assert got["valid"]
    data = got["json"]["data"]
    assert data["item_id"] == item.item_id and data["action"] == "transfer"
    assert data["title"] == "approve transfer?" and data["goal"] == "keep the balance up"
    # The body is agentd's evidence summary, brief: the source's state in agentd's words.
    assert data["body"].splitlines()[0] == "bank: ok · exit 0"
    for secret in (ARG_VALUE, WORLD_VALUE, REASON):
        assert secret.encode() not in got["raw"]


# ── what each kind of item says ──────────────────────────────────────────────────────────────────


async def _delivered(rig: Any, receiver: Receiver, **post: Any) -> dict[str, Any]:
    r = await rig()
    r.post(**post)
    await r.settle()
    (got,) = receiver.got
    data: dict[str, Any] = got["json"]["data"]
    return data


async def test_notify_question_carries_its_text_capped(rig: Any, receiver: Receiver) -> None:
    question = "Which region should the cache move to? " + "Details. " * 400
    data = await _delivered(rig, receiver, kind=InboxKind.QUESTION, title=question[:200],
                            body=question, rule="question")  # fmt: skip
    assert data["title"] == question[:200]
    assert data["body"].startswith("Which region") and len(data["body"]) == 1000


@pytest.mark.parametrize(
    ("rule", "question"),
    [  # as recovery.py `ask_unknown_outcome` and engine.py `check` / `after_invalid` ask them
        ("unknown_outcome", f"agentd stopped while running transfer {{'account': '{ARG_VALUE}'}} "
         "(key k) and cannot tell whether it happened. Did it happen?"),
        ("denied", f"The harness refused transfer {{'account': '{ARG_VALUE}'}} (policy: transfer "
         "= deny). What should this run do instead?"),
        ("invalid_output", f"The model gave 4 invalid replies in a row; last error: {ARG_VALUE} "
         "is not valid. What should this run do?"),
        # as outer/verdicts.py, inner/driver.py escalations and engine.py internal errors ask them
        ("achieved", f"goal 1 achieved? the page shows {ARG_VALUE}"),
        ("build_needs_info", f"R2 fails: Evidence: \"{ARG_VALUE}\". What should it say?"),
        ("build_stuck", f"R1 fails again: Evidence: \"{ARG_VALUE}\""),
        ("build_bound", f"3 revisions, R1 still fails: Evidence: \"{ARG_VALUE}\""),
        ("internal_error", f"KeyError: {ARG_VALUE!r} in step 4. Stop, retry or skip?"),
    ],
)  # fmt: skip
async def test_notify_question_quoting_an_action_says_so_in_its_own_words(
    rig: Any, receiver: Receiver, rule: str, question: str
) -> None:
    data = await _delivered(rig, receiver, kind=InboxKind.QUESTION, title=question[:200],
                            body=f"{question}\nWorld now: {WORLD_VALUE}", rule=rule)  # fmt: skip
    assert data["title"] == QUOTING_QUESTIONS[rule] and data["body"] == ""
    assert ARG_VALUE not in str(data) and WORLD_VALUE not in str(data)


async def test_notify_nudge_carries_the_suggestion_without_its_arguments(
    rig: Any, receiver: Receiver
) -> None:
    """As agentd/outer/verdicts.py `nudge` writes it."""
    nudge = {"topic": "disk", "message": "The disk fills up; rotate the logs.", "new": None,
             "suggested": {"action": "rotate", "args": {"path": ARG_VALUE}}}  # fmt: skip
    body = (f"{nudge['message']}\nSuggested: rotate {{'path': '{ARG_VALUE}'}}\nAccept (runs "
            "through the harness; policy and approvals apply): agentd inbox accept 1")  # fmt: skip
    data = await _delivered(rig, receiver, kind=InboxKind.NOTICE, rule="nudge",
                            title=f"{nudge['message']} — accept: agentd inbox accept 1",
                            body=body, data={"nudge": nudge})  # fmt: skip
    assert data["category"] == "nudge" and data["body"] == nudge["message"]
    assert ARG_VALUE not in str(data)


@pytest.mark.parametrize(
    ("title", "body", "sent"),
    [  # the notify action's message; a finished run's summary; a refusal quoting the arguments
        ("the deploy is done" * 20, "the deploy is done" * 30, True),
        ("run 7 succeeded: rotated 3 logs", "rotated 3 logs", True),
        ("transfer refused at execution: rate limit", f"Run 7 wanted transfer {ARG_VALUE}", False),
    ],
)
async def test_notify_notice_body_goes_out_only_where_it_continues_the_title(
    rig: Any, receiver: Receiver, home: Home, title: str, body: str, sent: bool
) -> None:
    r = await rig()
    run_id = home.store.write(
        lambda c: q.create_run(c, goal_id=r.goal_id, agent="default", trigger="test")
    )
    title = title.replace("run 7", f"run {run_id}")
    r.post(InboxKind.NOTICE, title=title[:200], body=body, run_id=run_id)
    await r.settle()
    data = receiver.got[0]["json"]["data"]
    assert data["title"] == title[:200] and data["body"] == (body if sent else "")


# ── inert text in every channel ──────────────────────────────────────────────────────────────────

HOSTILE_TITLE = "\x1b[31mpay now\x1b[0m \u202eevil.exe"
HOSTILE_BODY = "first line\x1b]0;owned\x07\nsecond \u202eline\x1b[2J"


def _raw_characters(value: str) -> set[str]:
    return {ch for ch in value if ch in "\x1b\x07\u202e"}


async def test_notify_escapes_and_bidi_arrive_inert_in_every_channel(
    rig: Any, receiver: Receiver
) -> None:
    from aiosmtpd.controller import Controller

    from tests.conftest import closed_port

    mails: list[bytes] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            mails.append(envelope.content)
            return "250 OK"

    ntfy, port = Receiver(), closed_port()
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        extra = f"""
            [notify.phone]
            type = "ntfy"
            url = "{ntfy.url}"
            topic = "agentd-ops"

            [notify.mail]
            type = "email"
            host = "127.0.0.1"
            port = {port}
            tls = "none"
            from = "agentd@example.test"
            to = ["ops@example.test"]
            """
        text_ = config_text(receiver.url, extra=extra)
        r = await rig(text_.replace('channels = ["ops"]', 'channels = ["ops", "phone", "mail"]'))
        r.post(InboxKind.QUESTION, title=HOSTILE_TITLE, body=HOSTILE_BODY)
        await r.settle()
    finally:
        smtp.stop()
        ntfy.close()
    hook = receiver.got[0]["json"]
    push = ntfy.got[0]["json"]
    mail = email.message_from_bytes(mails[0], policy=email.policy.default)
    shown = [hook["subject"], hook["data"]["title"], hook["data"]["body"], push["title"],
             push["message"], str(mail["subject"]), mail.get_content()]  # fmt: skip
    assert all(_raw_characters(s) == set() for s in shown), shown
    assert "\\x1b[31mpay now" in push["title"] and "\\u202eevil.exe" in str(mail["subject"])
    assert "first line\\x1b]0;owned\\x07\nsecond" in hook["data"]["body"]  # lines kept
    assert b"\x1b" not in mails[0]


def test_notify_subject_and_text_of_a_planned_message_are_one_line_and_plain() -> None:
    message = {"category": "question", "title": "a\nb", "item_id": 3, "stage": 1, "body": "x"}
    assert "\n" not in subject(message) and "reminder 1" in subject(message)
    assert text(message).endswith("or: agentd inbox show 3\n")
