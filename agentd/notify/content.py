"""What a notification may say about an inbox item: its title and the text that goes with it, by
category. A message leaves the machine (a webhook, a push service, a mailbox), so it names the item
and carries the operator's words to act on, never an action's arguments, results or world data:
those stay behind the web inbox's login and `agentd inbox show`. An approval or a question of a
run is headed by agentd's evidence summary in its brief form (`agentd.views.evidence.brief_lines`:
states, times, HTTP and exit codes, counts, action names — no text from the world).
"""

from __future__ import annotations

from agentd.models import JSON, InboxItem
from agentd.views import evidence as ev

BODY_CHARS = 1000  # a question or a message beyond this is read in the inbox
# Questions whose text quotes an action with its arguments (and, for unknown_outcome, the world
# now) or the model's rejected reply: agentd/runs/recovery.py `ask_unknown_outcome`, agentd/runs/engine.py
# `check` (escalated denials) and `after_invalid`, agentd/inner/driver.py; and more below. Their
# notification says what kind of question waits, in words of our own.
QUOTING_QUESTIONS = {
    "unknown_outcome": "a run stopped during an action and cannot tell whether it happened",
    "denied": "the harness refused a run's action: what should the run do instead?",
    "invalid_output": "the model's replies were invalid several times: what should the run do?",
    # …and those quoting the world, an artifact or an exception: a check-in's evidence that a
    # goal is achieved (agentd/outer/verdicts.py), a build's judged requirement with its evidence
    # (agentd/inner/driver.py escalations), a run's internal error (agentd/runs/engine.py).
    "achieved": "a check-in thinks a goal is achieved: confirm or say what is missing",
    "build_needs_info": "a build needs information only you have",
    "build_stuck": "a build fails the same requirements again: how should it go on?",
    "build_bound": "a build used its revisions without passing: how should it go on?",
    "internal_error": "a run hit an internal error: stop, retry or skip?",
}


def _cap(text: str) -> str:
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"


def _body_continues_title(item: InboxItem) -> bool:
    """The notice's title already shows the beginning of its body: the `notify` action's message
    (its title: the message cut at a word) or a finished run's summary (`run N status: summary…`).
    Other notices (an action refused at execution, a result that came after its run stopped) hold
    the action's arguments or result in their body."""
    # A title cut at a word ends in … (agentd.text.cut_at_word): its text before is the start.
    title, body = item.title.removesuffix("…"), item.body
    if not body:
        return False
    if body.startswith(title):
        return True
    lead = f"run {item.run_id} "
    if item.run_id is None or not title.startswith(lead) or ": " not in title:
        return False
    return body.startswith(title.split(": ", 1)[1])


def about(item: InboxItem, category: str, evidence: JSON | None = None) -> tuple[str, str]:
    """(title, body) of the notification about `item`, whose category is one of config_notify's;
    `evidence` is the item's summary (`agentd.views.evidence.summary`), if any.

    - approval: "approve ACTION?" and the evidence's brief lines — never the item's body, which
      holds the arguments and the world; the message carries the action's name, the goal and
      where to look.
    - question: the question itself (capped), except the questions that quote an action's
      arguments (QUOTING_QUESTIONS), which get a fixed sentence; then the evidence's brief lines.
    - nudge: the check-in's suggestion in words, without the suggested action's arguments.
    - notice, failure: the title, and the body only where it continues the title (the `notify`
      action's message, a finished run's summary).
    """
    brief = "\n".join(ev.brief_lines(evidence)) if evidence else ""
    if category == "approval":
        return (f"approve {item.action}?" if item.action else "approval needed"), _cap(brief)
    if category == "question":
        if item.rule in QUOTING_QUESTIONS:
            return QUOTING_QUESTIONS[item.rule], _cap(brief)
        text = _cap(item.body)
        return item.title, f"{text}\n\n{brief}" if brief and text else text or _cap(brief)
    if category == "nudge":
        nudge = item.data.get("nudge")
        message = nudge.get("message") if isinstance(nudge, dict) else None
        return item.title, _cap(str(message or ""))
    return item.title, _cap(item.body) if _body_continues_title(item) else ""
