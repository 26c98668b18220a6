"""A check-in's verdict made real, inside the transaction that marks the check-in done: a nudge
(never a repeat of an open nudge's topic, nor of a resolved one's unless something new justifies
it — and then it says what), a clarifying question, the confirm-to-close question, and the memory
entry every verdict leaves. "Nothing" leaves only memory: it never reaches the operator.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from agentd.db import checkins as qc
from agentd.db import items as qi
from agentd.db import memory as mem
from agentd.db.checkins import Checkin
from agentd.models import JSON, InboxKind
from agentd.text import cut_at_word, urls_shown

MAX_OPEN_CLARIFY = 2  # clarifying questions open at once for a goal
RESPITE_S = 86400.0  # a dismissed topic is not raised again sooner, whatever is new


def nudge(c: Any, row: Checkin, v: JSON, now: float) -> JSON:
    """Post a nudge — unless it repeats an open nudge's topic, or a resolved one's with nothing
    new since (what moved besides the operator's responses to nudges), or a topic the operator
    dismissed less than RESPITE_S ago."""
    new = [r for r in row.precheck.get("reasons", []) if not r.startswith("nudge ")]
    earlier = [n for n in qc.nudges(c, row.goal_id, limit=50) if same_topic(v["topic"], n["topic"])]
    if opened := [n for n in earlier if n["status"] == "open"]:
        return {"suppressed": f"nudge {opened[0]['item_id']} on this topic is still open"}
    what_new = ""
    if earlier:
        last = earlier[0]
        if not new:
            return {"suppressed": f"nudge {last['item_id']} on this topic was {last['status']} "
                    "and nothing new justifies another"}  # fmt: skip
        if last["status"] == "dismissed" and now - float(last["resolved_at"] or 0) < RESPITE_S:
            return {"suppressed": f"nudge {last['item_id']} on this topic was dismissed less "
                    "than a day ago"}  # fmt: skip
        what_new = f"New since nudge {earlier[0]['item_id']}: {v.get('new') or '; '.join(new)}."
    suggested = v.get("suggested")
    data = {
        "nudge": {k: v.get(k) for k in ("topic", "message", "suggested", "new")},
        "checkin_id": row.checkin_id, "posted_at": now,
    }  # fmt: skip
    item_id = qi.post(c, InboxKind.NOTICE, title=cut_at_word(v["message"]), goal_id=row.goal_id,
                      rule="nudge", data=data)  # fmt: skip
    lines = [v["message"]] + ([what_new] if what_new else [])
    if suggested:
        lines.append(f"Suggested: {suggested['action']} {_args(suggested['args'])}")
        lines.append(f"Accept (runs through the harness; policy and approvals apply): "
                     f"agentd inbox accept {item_id}")  # fmt: skip
    lines.append(f'Not useful? agentd inbox dismiss {item_id} --reason "…" (agentd then checks '
                 "in less often)")  # fmt: skip
    accept_hint = f" — accept: agentd inbox accept {item_id}" if suggested else ""
    qc.set_item_text(
        c, item_id, cut_at_word(cut_at_word(v["message"], 150) + accept_hint), "\n".join(lines)
    )
    return {"item_id": item_id, **({"new": what_new} if what_new else {})}


def clarify(c: Any, row: Checkin, question: str, now: float) -> JSON:
    opened = qc.open_questions(c, row.goal_id, "clarify")
    if any(_words(o["title"]) == _words(question) for o in opened):
        return {"suppressed": "the same question is already open"}
    if len(opened) >= MAX_OPEN_CLARIFY:
        return {"suppressed": f"{len(opened)} clarifying questions are already open"}
    item_id = qi.post(c, InboxKind.QUESTION, title=cut_at_word(question), goal_id=row.goal_id,
                      rule="clarify", data={"checkin_id": row.checkin_id, "posted_at": now})  # fmt: skip
    body = (f"{question}\nAnswer: agentd inbox answer {item_id} \"…\" — the answer becomes part "
            f"of what goal {row.goal_id} remembers.")  # fmt: skip
    qc.set_item_text(c, item_id, cut_at_word(question), body)
    return {"item_id": item_id}


def achieved(c: Any, row: Checkin, evidence: str, now: float) -> JSON:
    if opened := qc.open_questions(c, row.goal_id, "achieved"):
        return {"suppressed": f"question {opened[0]['item_id']} already asks to confirm"}
    title = cut_at_word(f"goal {row.goal_id} achieved? {evidence}")
    item_id = qi.post(c, InboxKind.QUESTION, title=title, goal_id=row.goal_id, rule="achieved",
                      data={"checkin_id": row.checkin_id, "posted_at": now})  # fmt: skip
    body = (f"{evidence}\nConfirm to close goal {row.goal_id} as achieved: agentd inbox answer "
            f"{item_id} yes — or answer with what is still missing.")  # fmt: skip
    qc.set_item_text(c, item_id, title, body)
    return {"item_id": item_id}


def remember(c: Any, row: Checkin, v: JSON, reason: str, effect: JSON, now: float) -> None:
    """One memory entry per check-in verdict; repeated "nothing" updates one entry."""
    source = f"checkin:{row.checkin_id}"
    kind = v["kind"]
    if kind == "nothing":
        last = mem.latest(c, row.goal_id)
        if last is not None and last["kind"] == "checkin" and last["text"].startswith("nothing"):
            m = re.match(r"nothing to report \(×(\d+)\)", last["text"])
            n = int(m.group(1)) + 1 if m else 2
            mem.rewrite(c, last["entry_id"], f"nothing to report (×{n}): {reason}", now)
            return
        text = f"nothing to report: {reason}"
    elif "suppressed" in effect or "skipped" in effect:
        text = f"{kind} held back ({effect.get('suppressed') or effect.get('skipped')}): " + (
            v.get("topic") or v.get("question") or v.get("request") or v.get("evidence") or ""
        )
    elif kind == "nudge":
        text = f"nudged (item {effect['item_id']}) on {v['topic']!r}: {v['message']}"
    elif kind == "ask":
        # What this look saw is kept with the question: the next look may not see it again.
        text = f"asked (item {effect['item_id']}): {v['question']} (having seen: {reason})"
    elif kind == "start_run":
        text = f"started run {effect['run_id']}: {v['request']}"
    else:
        text = f"proposed closing as achieved (item {effect['item_id']}): {v['evidence']}"
    mem.remember(c, row.goal_id, "checkin", text, source, now)


# ── relevance ────────────────────────────────────────────────────────────────────────────────────

_STOP = frozenset(("a", "an", "the", "to", "of", "for", "on", "in", "at", "and", "or", "your",
                   "you", "my", "our", "we", "i", "me", "us", "it", "its", "is", "are", "be",
                   "by", "from", "into", "with", "about", "re", "new"))  # fmt: skip
# Words a rewording adds or drops without naming another need ("… soon", "please …").
_FILLER = frozenset(("please", "soon", "today", "tonight", "now", "this", "that", "week",
                     "asap", "still", "again", "just", "up", "out", "do", "maybe", "quickly",
                     "yet", "time"))  # fmt: skip


def _words(text: str | None) -> frozenset[str]:
    """The words of any script, case and accents folded ("Café Zürich" is "cafe zurich";
    "заказать торт" has two words, not none)."""
    folded = unicodedata.normalize("NFKD", (text or "").casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return frozenset(w for w in re.findall(r"[^\W_]+", plain) if w not in _STOP)


def _stem(word: str) -> str:
    """A light stem, so "invitations", "invite" and "invited" compare as one word (numbers stay
    whole: "incident 3" and "incident 4" are two needs)."""
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("ing", "ed")) and len(word) > 5:
        word = word[: -3 if word.endswith("ing") else -2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ation") and len(word) > 7:
        word = word[:-5]
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _terms(text: str | None) -> frozenset[str]:
    """The words of a topic that say which need it is: stop words and a rewording's fillers
    dropped, stemmed — whatever their case ("acme" names a company as much as "Acme")."""
    return frozenset(_stem(w) for w in _words(text) if w not in _FILLER)


def same_topic(a: str | None, b: str | None) -> bool:
    """Whether two nudge topics name the same need: one's terms (stemmed words less stop words
    and fillers) all within the other's — a rewording adds or drops words ("please … soon"), it
    does not swap them. When each topic has a term the other lacks, they are two needs, however
    alike the rest: "apply to the acme senior backend role" and "apply to the globex senior
    backend role" are two postings, "incident 3" and "incident 4" two incidents. (A repeat guard
    that errs holds back a need never nudged; one that errs the other way repeats a nudge.)"""
    ta, tb = _terms(a), _terms(b)
    if not ta or not tb:
        return False
    return ta <= tb or tb <= ta


def _args(args: JSON) -> str:
    return " ".join(f"{k}={v!r}" for k, v in args.items()) or "(no arguments)"


FAILED_NOTICE_AFTER = 3  # check-ins of a goal failing in a row before the operator is told


def failing_notice(c: Any, row: Checkin, reason: str, now: float) -> int | None:
    """After FAILED_NOTICE_AFTER failed check-ins in a row, one notice (once per streak): the
    goal's check-ins are not deciding, and why."""
    streak = qc.failed_streak(c, row.goal_id)
    if streak != FAILED_NOTICE_AFTER:
        return None
    return qi.post(
        c, InboxKind.NOTICE, goal_id=row.goal_id, rule="checkin_failed",
        title=f"Check-ins of goal {row.goal_id} failed {streak} times in a row",
        body=f"The last one: {urls_shown(reason)}\nSee `agentd checkins --goal {row.goal_id}`; fix "
        "the check-in model (its replies, key or address) and the next check-in tries again.",
        data={"posted_at": now, "checkin_id": row.checkin_id},
    )  # fmt: skip
