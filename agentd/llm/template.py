"""The `template` provider: a small, deterministic writer and judge for build runs — the embedded
default for the demo and tests when no API key is configured. Like the runbook, it is code behind
the Model interface: the build run, its journal and the harness do not know the difference.

Material (`agentd build --from FILE`) is read as facts, one per line: `Key: value`.

    plan      no extra requirements, no question
    generate  a Markdown document: a Summary, then a section for each fact key the request names;
              a revision adds a section for each failing requirement, filled with the facts whose
              key shares a word with it (or the operator's guidance; "unknown" when neither)
    judge     a requirement passes when a heading shares a significant word with it and its
              section has content (evidence: that heading, quoted); "serves the why" when the
              text names a word of the goal's title or why

It is a mechanical stand-in for a writer, honest about being one: it never invents facts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentd.config import TemplateModel
from agentd.llm import ModelReply, ModelRequest, mechanical_summary
from agentd.models import JSON

_WORD = re.compile(r"[a-zà-ÿ0-9]+")
_FACT = re.compile(r"^\s*([A-Za-z][\w ()/-]{0,40}):\s+(.+?)\s*$")
_STOP = frozenset(  # words of four letters or more that say nothing about a topic
    ("that", "this", "what", "when", "where", "which", "into", "onto", "about", "after", "before",
     "their", "them", "they", "have", "were", "with", "from", "each", "every", "your", "should")
)  # fmt: skip
_HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*$", re.MULTILINE)


def words(text: str) -> set[str]:
    """Significant words: four letters or more, no stop words, lower case."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOP}


def facts(material: str) -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in map(_FACT.match, material.splitlines()) if m]


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) pairs of a Markdown text."""
    marks = list(_HEADING.finditer(text))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append((m.group(1), text[m.end() : end].strip()))
    return out


class Template:
    def __init__(self, name: str, cfg: TemplateModel) -> None:
        self.name = name
        self.cfg = cfg

    async def complete(self, request: ModelRequest) -> ModelReply:
        ctx = request.context
        if request.purpose == "plan":
            out: JSON = {"reason": "template: builds from the explicit requirements",
                         "requirements": [], "question": None}  # fmt: skip
        elif request.purpose == "generate":
            out = generate(ctx)
        elif request.purpose == "judge":
            out = judge(ctx)
        elif request.purpose == "summarize":
            out = {"summary": mechanical_summary(ctx)}
        else:  # decisions and check-ins are not a template's job
            out = {"reason": "template: nothing to decide", "next_look_in_s": None,
                   "verdict": {"kind": "nothing"}}  # fmt: skip
        text = json.dumps(out, ensure_ascii=False)
        return ModelReply(
            text=text, model="template",
            tokens_in=len(request.system) // 4 + len(request.prompt) // 4,
            tokens_out=len(text) // 4,
        )  # fmt: skip


def _matching(known: list[tuple[str, str]], topic: str) -> list[str]:
    want = words(topic)
    return [f"{k}: {v}" if k.lower() == "timeline" else v for k, v in known if want & words(k)]


def generate(ctx: JSON) -> JSON:
    spec: JSON = ctx.get("spec") or {}
    known = facts(str(spec.get("material") or ""))
    previous: JSON | None = ctx.get("previous")
    request = str(spec.get("request", "")).strip().splitlines()[0][:100] if spec else "Draft"
    if previous is None:
        parts = [f"# {request[:1].upper()}{request[1:]}", "## Summary",
                 known[0][1] if known else request]  # fmt: skip
        for key in dict.fromkeys(k for k, _ in known):  # in order, once each
            if words(key) & words(request):
                parts += [f"## {key}", _bullets(v for k, v in known if k == key)]
        return {"notes": "template: first draft from the request", "artifact": "\n\n".join(parts)}
    text = str(previous["text"]).rstrip()
    guidance = [str(g) for g in ctx.get("guidance") or []]
    added: list[str] = []
    have = {h.lower() for h, _ in _sections(text)}

    def section(heading: str, lines: list[str], rid: str) -> None:
        nonlocal text
        low = heading.lower()
        if not any(low in h or h in low for h in have):  # as the sections check matches
            have.add(low)
            text += f"\n\n## {heading}\n\n{_bullets(lines)}"
            added.append(rid)

    for f in previous["verdict"]["findings"]:
        if f["pass"] or (f["source"] == "check" and f["id"] != "size"):
            continue
        topic = str(f["text"]).removeprefix("Serves the goal's why: ")
        lines = _matching(known, topic) or guidance or ["Unknown: no material covers this yet."]
        section(topic[:1].upper() + topic[1:80], lines, f["id"])
    for f in previous["verdict"]["findings"]:  # deterministic checks name what they need
        if not f["pass"] and f["source"] == "check" and str(f["fix"]).startswith("add headings"):
            for name in re.findall(r"## ([^,]+)", str(f["fix"])):
                lines = _matching(known, name) or ["Unknown: no material covers this yet."]
                section(name.strip(), lines, f["id"])
    return {"notes": f"template: added sections for {', '.join(added) or 'nothing'}",
            "artifact": text}  # fmt: skip


def _bullets(lines: Any) -> str:
    return "\n".join(f"- {line}" for line in lines)


def judge(ctx: JSON) -> JSON:
    text = str(ctx.get("artifact", ""))
    sections = _sections(text)
    known = facts(str((ctx.get("spec") or {}).get("material") or ""))
    findings = []
    for r in ctx.get("requirements", []):
        if r["source"] == "check" or r.get("why"):
            continue
        hit = next(((h, b) for h, b in sections if words(h) & words(r["text"]) and b), None)
        unknown = hit is not None and hit[1].startswith("- Unknown:")
        ok = hit is not None and not unknown
        findings.append({
            "id": r["id"], "pass": ok,
            "evidence": f"## {hit[0]}" if hit else "absent",
            "fix": "" if ok else f"Add a section \"## {r['text'][:60]}\" covering it",
            "needs_info": not ok and (unknown or not _matching(known, r["text"])),
        })  # fmt: skip
    goal: JSON = ctx.get("goal") or {}
    aim = words(f"{goal.get('title', '')} {goal.get('why', '')}")
    named = sorted(aim & words(text))
    passed = sum(1 for f in findings if f["pass"])
    return {
        "requirements": findings,
        "serves_why": {
            "pass": bool(named) or not aim,
            "reason": f"names {', '.join(named[:5])}" if named else "names nothing of the goal",
            "fix": "" if named else "tie the text to the goal's why",
        },
        "summary": f"{passed} of {len(findings)} judged requirements met (template judge; "
        "checks and the why are shown apart).",
    }
