"""What a build is asked to make and how its verdicts combine — pure data, no model, no database.

A build's **spec** is the request (what), the explicit requirements, optional source material, and
its goal's why. Its **requirements** are fixed once, at the PLAN step: explicit ones (the operator),
the ones a model extracted from the request or the goal's memory, "serves the goal's why", and the
configured deterministic checks — each with where it came from, shown to the operator.

A **verdict** merges the deterministic checks (they always win) with the model judge's findings.
"""

from __future__ import annotations

from typing import Any

from agentd.errors import UsageError, require_utf8
from agentd.models import JSON

MAX_REQUEST = 4000  # characters of a request
MAX_REQUIREMENT = 500  # characters of one requirement
MAX_REQUIREMENTS = 20  # explicit requirements; the model may add up to MAX_EXTRACTED more
MAX_EXTRACTED = 10
MAX_MATERIAL = 100_000  # characters of --from material (quoted as data in the prompts)
MAX_GUIDANCE = 5  # operator answers kept as guidance (newest)
MAX_FINDING_TEXT = 600  # characters of one evidence or fix
SOURCES = ("operator", "run", "request", "memory", "goal", "check")  # "run": a run's build action

STOP_WORDS = ("stop", "cancel", "abort")
JUDGEMENT_WORDS = ("use your judgement", "use your judgment", "your call", "go on", "continue")


def make_spec(request: str, requirements: list[str], material: str | None = None) -> JSON:
    """A validated spec for a new build, or UsageError saying what to fix."""
    require_utf8("the request", request)
    for r in requirements:
        require_utf8("a --require", r)
    request = request.strip()
    if not request:
        raise UsageError('the request is empty: say what to build, e.g. "a one-page résumé"')
    if len(request) > MAX_REQUEST:
        raise UsageError(f"the request is {len(request)} characters; the limit is {MAX_REQUEST}")
    reqs = [r.strip() for r in requirements]
    if any(not r for r in reqs):
        raise UsageError("a --require is empty")
    if len(reqs) > MAX_REQUIREMENTS:
        raise UsageError(f"{len(reqs)} requirements; the limit is {MAX_REQUIREMENTS}")
    if long := [r for r in reqs if len(r) > MAX_REQUIREMENT]:
        raise UsageError(
            f"a requirement is {len(long[0])} characters; the limit is {MAX_REQUIREMENT}"
        )
    spec: JSON = {"request": request, "requirements": reqs}
    if material is not None:
        if len(material) > MAX_MATERIAL:
            raise UsageError(
                f"the material is {len(material)} characters; the limit is {MAX_MATERIAL}"
            )
        spec["material"] = material
    return spec


def requirement_list(spec: JSON, why: str, extracted: list[JSON], checks: list[JSON]) -> list[JSON]:
    """The run's requirements with stable ids: R1… (explicit, extracted, the why), C1… (checks)."""
    out: list[JSON] = []
    given_by = "run" if spec.get("by") == "run" else "operator"
    for text in spec.get("requirements", []):
        out.append({"text": text, "source": given_by})
    seen = {r["text"].lower() for r in out}
    for r in extracted[:MAX_EXTRACTED]:
        text = " ".join(str(r.get("text", "")).split())[:MAX_REQUIREMENT]
        source = r.get("source") if r.get("source") in ("request", "memory", "goal") else "request"
        if text and text.lower() not in seen:
            seen.add(text.lower())
            out.append({"text": text, "source": source})
    if why.strip():
        out.append({"text": f"Serves the goal's why: {why.strip()[:400]}", "source": "goal",
                    "why": True})  # fmt: skip
    for i, r in enumerate(out, 1):
        r["id"] = f"R{i}"
    for i, c in enumerate(checks, 1):
        out.append({"id": f"C{i}", "text": c["text"], "source": "check", "check": c["check"]})
    return out


def _clip(value: Any, limit: int = MAX_FINDING_TEXT) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def merge_verdict(
    requirements: list[JSON], judged: JSON | None, checked: dict[str, JSON], artifact: str
) -> JSON:
    """One verdict for a version: the model judge's per-requirement findings and its why-verdict,
    overruled by deterministic check results (`checked`, by check id) where they disagree.

    A requirement the judge did not answer counts as failed ("not judged"): silence is no pass.
    Evidence is marked `quoted` only when it is literally in the artifact.
    """
    by_id: dict[str, JSON] = {}
    for f in (judged or {}).get("requirements", []):
        if isinstance(f, dict) and isinstance(f.get("id"), str):
            by_id[f["id"]] = f
    why = (judged or {}).get("serves_why") or {}
    findings: list[JSON] = []
    for r in requirements:
        if r["source"] == "check":
            c = checked.get(r["id"], {"pass": False, "evidence": "check did not run", "fix": ""})
            findings.append({**_base(r), "pass": bool(c["pass"]), "by": "check",
                             "evidence": _clip(c.get("evidence")), "fix": _clip(c.get("fix")),
                             "needs_info": False, "quoted": False})  # fmt: skip
            continue
        if r.get("why"):
            f = {"pass": why.get("pass"), "evidence": why.get("reason"), "fix": why.get("fix")}
        else:
            f = by_id.get(r["id"], {})
        passed = f.get("pass") is True
        evidence = _clip(f.get("evidence")) if f else "the judge did not answer this requirement"
        findings.append({
            **_base(r), "pass": passed, "by": "judge", "evidence": evidence,
            "fix": _clip(f.get("fix")), "needs_info": bool(f.get("needs_info")) and not passed,
            "quoted": bool(evidence) and evidence.strip('"“”') in artifact,
        })  # fmt: skip
    failing = [f["id"] for f in findings if not f["pass"]]
    return {
        "passed": not failing,
        "failing": failing,
        "serves_why": {"pass": why.get("pass") is True, "reason": _clip(why.get("reason"))},
        "summary": _clip((judged or {}).get("summary"), 1000),
        "findings": findings,
    }


def _base(r: JSON) -> JSON:
    return {"id": r["id"], "text": r["text"], "source": r["source"]}


def stuck(previous: JSON | None, current: JSON) -> bool:
    """The same failures twice in a row: a revision made no progress."""
    return bool(
        previous is not None
        and current["failing"]
        and set(previous.get("failing", [])) == set(current["failing"])
    )


def escalation_question(run_id: int, version: int, verdict: JSON, why: str) -> str:
    """One specific question for the operator, quoting the failing requirement and evidence."""
    failing = [f for f in verdict["findings"] if not f["pass"]]
    first = next((f for f in failing if f["needs_info"]), failing[0] if failing else None)
    lead = {
        "needs_info": "needs information I do not have",
        "stuck": "keeps failing and the last revision made no progress",
        "bound": "still fails after the most revisions allowed",
    }[why]
    if first is None:  # not reached: escalation needs a failure
        return f"Build {run_id} (version {version}) needs your input. What should it do?"
    others = len(failing) - 1
    return (
        f'Build {run_id}, version {version}: requirement {first["id"]} "{first["text"]}" '
        f'{lead}. Evidence: "{first["evidence"]}".'
        + (f" Suggested fix: {first['fix']}." if first["fix"] else "")
        + (f" ({others} other requirement(s) fail too.)" if others > 0 else "")
        + " Answer with what is missing or how to proceed (the build then revises again, up to"
        ' max_revisions more times); "use your judgement" to go on revising without new'
        ' information; or "stop" to end the build.'
    )


def read_answer(answer: str) -> str:
    """`stop`, `judgement`, or `guidance` (the answer is information for the next draft)."""
    text = " ".join(answer.lower().split()).strip(" .!")
    if text in STOP_WORDS:
        return "stop"
    if text in JUDGEMENT_WORDS:
        return "judgement"
    return "guidance"
