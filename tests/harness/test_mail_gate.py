"""The harness gates a reply that would be sent: never from a drafts-only action, and never to a
recipient outside the allow-list without an approval, whatever the policy default (pure)."""

from __future__ import annotations

from typing import Any

from agentd.config.mail import MailReplyAction
from agentd.harness import mail as gate
from agentd.models import Verdict


def reply(**keys: Any) -> MailReplyAction:
    return MailReplyAction.model_validate({"type": "mail_reply", "source": "inbox", **keys})


ARGS = {"message_id": "<a@b.c>", "to": ["bob@example.com"], "subject": "Re", "body": "x"}


def test_gate_a_draft_is_the_policy_alone() -> None:
    assert gate.gate(reply(), ARGS, Verdict.ALLOW, "default")[0] == Verdict.ALLOW


def test_gate_a_drafts_only_action_never_sends() -> None:
    verdict, rule = gate.gate(reply(), {**ARGS, "send": True}, Verdict.ALLOW, "default")
    assert verdict == Verdict.DENY and "only saves drafts" in rule


def test_gate_recipient_outside_allow_list_needs_approval() -> None:
    cfg = reply(send=True, smtp="relay", allow_recipients=["*@example.com"])
    inside = gate.gate(cfg, {**ARGS, "send": True}, Verdict.ALLOW, "default")
    assert inside[0] == Verdict.ALLOW
    outside = {**ARGS, "send": True, "to": ["bob@example.com", "x@evil.example"]}
    verdict, rule = gate.gate(cfg, outside, Verdict.ALLOW, "default")
    assert verdict == Verdict.APPROVE and "x@evil.example" in rule and "bob@" not in rule
    assert gate.gate(cfg, outside, Verdict.DENY, "policy")[0] == Verdict.DENY
