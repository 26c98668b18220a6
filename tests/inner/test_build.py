"""The inner loop (issue 9): build runs draft, judge and revise through the real daemon, with a
scripted generator and judge behind the same interface as real models. Counts come from the
scripted provider's request log and the database, never from the code under test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.db import artifacts as qa
from agentd.db import items as qi
from agentd.db import leases
from agentd.db import memory as qm
from agentd.db import queries as q
from agentd.inner import spec as build_spec
from agentd.models import InboxKind, RunStatus, StepKind
from tests.conftest import Home, finished, wait_for, waiting

CONFIG = """
[daemon]
poll_interval_s = 0.05

[models.default]
provider = "scripted"
replies = "replies.json"
request_log = "requests.jsonl"
{extra_models}
[agents.default]
actions = ["finish"]

[agents.default.build]
max_revisions = {max_revisions}
{build_extra}
"""

PLAN = {"reason": "clear enough", "requirements": [], "question": None}


def draft(text: str) -> dict[str, Any]:
    return {"notes": "the generator's private reasoning: SECRET-NOTES", "artifact": text}


def verdict(*fails: str, n: int = 2, why: bool = True, summary: str = "ok") -> dict[str, Any]:
    """A judge reply over requirements R1..Rn: the ids in `fails` fail."""
    return {
        "requirements": [
            {"id": f"R{i}", "pass": f"R{i}" not in fails,
             "evidence": "absent" if f"R{i}" in fails else "Go", "fix": f"fix R{i}" if f"R{i}"
             in fails else "", "needs_info": False}
            for i in range(1, n + 1)
        ],
        "serves_why": {"pass": why, "reason": "fits the role", "fix": ""},
        "summary": summary,
    }  # fmt: skip


def setup(
    home: Home, replies: dict[str, list[Any]], max_revisions: int = 3, build_extra: str = "",
    extra_models: str = "",
) -> int:  # fmt: skip
    home.write_config(
        CONFIG.format(max_revisions=max_revisions, build_extra=build_extra,
                      extra_models=extra_models),
        replies=replies,  # type: ignore[arg-type]
    )  # fmt: skip
    return home.add_goal(title="get a backend job")


def start_build(home: Home, goal_id: int, request: str, *requires: str) -> int:
    spec = build_spec.make_spec(request, list(requires))
    return home.store.write(
        lambda c: qa.create_build(c, goal_id=goal_id, agent="default", spec=spec)
    )


def requests(home: Home, purpose: str | None = None) -> list[dict[str, Any]]:
    path = home.root / "requests.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in lines if purpose is None or r["purpose"] == purpose]


def versions(home: Home, run_id: int) -> list[dict[str, Any]]:
    return home.store.read(lambda c: qa.all_versions(c, run_id))


def open_questions(home: Home, run_id: int) -> list[Any]:
    items = home.store.read(lambda c: qi.list_items(c, status="open"))
    return [i for i in items if i.run_id == run_id and i.kind == InboxKind.QUESTION]


async def answer(home: Home, item_id: int, text: str) -> None:
    from agentd.operator import inbox

    inbox.answer(home.store, item_id, text)


async def test_passes_on_the_first_draft(home: Home, serve: Any) -> None:
    goal = setup(home, {"plan": [PLAN], "generate": [draft("# CV\nGo, 6 years")],
                        "judge": [verdict()]})  # fmt: skip
    run = start_build(home, goal, "a CV for Acme", "mentions Go", "one page")
    await serve()
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    [v] = versions(home, run)
    assert v["status"] == "passed" and v["text"].startswith("# CV")
    assert [r["n"] for r in requests(home, "generate")] == [1]
    assert len(requests(home, "judge")) == 1
    # The judge never sees the generator's notes.
    assert "SECRET-NOTES" not in requests(home, "judge")[0]["prompt"]
    # A notice with the judge's summary; memory records the artifact for the next check-in.
    notices = [i for i in home.store.read(lambda c: qi.list_items(c)) if i.run_id == run]
    assert any(i.kind == InboxKind.NOTICE and "passed" in i.title for i in notices)
    memory = home.store.read(lambda c: qm.recall(c, goal))
    assert any(f"artifact {run} v1 passed" in m["text"] for m in memory)


async def test_passes_after_two_revisions_and_each_revision_sees_the_findings(
    home: Home, serve: Any
) -> None:
    goal = setup(home, {
        "plan": [PLAN],
        "generate": [draft("v1 text"), draft("v2 text"), draft("v3 text with Go")],
        "judge": [verdict("R1", "R2"), verdict("R1"), verdict()],
    })  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go", "one page")
    await serve()
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    assert [v["status"] for v in versions(home, run)] == ["failed", "failed", "passed"]
    gens = requests(home, "generate")
    assert len(gens) == 3
    assert "fix R1" in gens[1]["prompt"] and "fix R2" in gens[1]["prompt"]
    assert "v1 text" in gens[1]["prompt"]  # the version it revises
    assert "fix R1" in gens[2]["prompt"] and "fix R2" not in gens[2]["prompt"]
    assert "v1 text" not in gens[2]["prompt"]  # only the latest version: bounded prompts


async def test_stuck_asks_one_question_then_resumes_with_the_answer(home: Home, serve: Any) -> None:
    goal = setup(home, {
        "plan": [PLAN],
        "generate": [draft("v1"), draft("v2"), draft("v3 for Acme")],
        "judge": [verdict("R2"), verdict("R2"), verdict()],
    })  # fmt: skip
    run = start_build(home, goal, "a cover letter", "mentions Go", "names the company")
    await serve()
    await wait_for(waiting(home, run))
    [q] = open_questions(home, run)
    assert "R2" in q.body and "names the company" in q.body and "no progress" in q.body
    assert len(requests(home, "generate")) == 2  # no third draft before the answer
    await answer(home, q.item_id, "The company is Acme GmbH in Berlin")
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    third = requests(home, "generate")[2]["prompt"]
    assert "Acme GmbH in Berlin" in third


async def test_bound_reached_escalates(home: Home, serve: Any) -> None:
    goal = setup(home, {
        "plan": [PLAN],
        "generate": [draft("v1"), draft("v2")],
        "judge": [verdict("R1"), verdict("R2")],  # different failures: progress, not stuck
    }, max_revisions=1)  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go", "one page")
    await serve()
    await wait_for(waiting(home, run))
    [q] = open_questions(home, run)
    assert "most revisions allowed" in q.body and "R2" in q.body
    assert len(requests(home, "generate")) == 2
    await answer(home, q.item_id, "stop")
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.CANCELLED


async def test_a_deterministic_check_overrides_a_judge_pass(home: Home, serve: Any) -> None:
    extra = 'checks = [{kind = "phrases", phrases = ["Acme"]}, {kind = "max_chars", limit = 200}]'
    goal = setup(home, {
        "plan": [PLAN],
        "generate": [draft("a letter for some company"), draft("a letter for Acme")],
        "judge": [verdict(n=1)],  # the judge passes everything, every time
    }, build_extra=extra)  # fmt: skip
    run = start_build(home, goal, "a cover letter", "polite")
    await serve()
    await wait_for(finished(home, run))
    first, second = versions(home, run)
    assert first["status"] == "failed" and first["verdict"]["failing"] == ["C1"]
    c1 = next(f for f in first["verdict"]["findings"] if f["id"] == "C1")
    assert c1["by"] == "check" and "Acme" in c1["evidence"]
    assert second["status"] == "passed"
    assert "Acme" in requests(home, "generate")[1]["prompt"]  # the check's fix reached it


async def test_a_clarifying_question_comes_before_the_first_draft(home: Home, serve: Any) -> None:
    plan = {"reason": "r", "question": "Which role: backend or SRE?",
            "requirements": [{"text": "one page", "source": "memory"}]}  # fmt: skip
    goal = setup(home, {"plan": [plan], "generate": [draft("v1")], "judge": [verdict(n=2)]})
    run = start_build(home, goal, "a CV", "mentions Go")
    await serve()
    await wait_for(waiting(home, run))
    [q] = open_questions(home, run)
    assert "backend or SRE" in q.body
    assert requests(home, "generate") == []
    await answer(home, q.item_id, "use your judgement")
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    steps = home.steps(run)
    plan_step = next(s for s in steps if s.kind == StepKind.PLAN)
    sources = [(r["id"], r["source"]) for r in plan_step.data["requirements"]]
    assert sources == [("R1", "operator"), ("R2", "memory"), ("R3", "goal")]
    # "use your judgement" is no guidance: the draft's prompt carries no operator block.
    assert "<operator>" not in requests(home, "generate")[0]["prompt"]


async def test_invalid_judge_replies_are_re_asked_then_escalated(home: Home, serve: Any) -> None:
    goal = setup(home, {"plan": [PLAN], "generate": [draft("v1")],
                        "judge": ["not json", {"summary": "no lists"}, "[]"]},
                 build_extra="max_invalid = 3")  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go")
    await serve()
    await wait_for(waiting(home, run))
    [q] = open_questions(home, run)
    assert "invalid judge replies" in q.body
    assert len(requests(home, "judge")) == 3
    assert len(requests(home, "generate")) == 1  # the draft is never made again
    errors = [s.data["error"] for s in home.steps(run) if s.kind == StepKind.JUDGE]
    assert "not JSON" in errors[0] and "lacks" in errors[1]
    assert "was invalid" in requests(home, "judge")[1]["prompt"]  # each re-ask says why


async def test_a_stronger_judge_model_is_used_when_configured(home: Home, serve: Any) -> None:
    (home.root).mkdir(parents=True, exist_ok=True)
    (home.root / "judge.json").write_text(json.dumps({"judge": [verdict(n=1)]}))
    extra_models = (
        '[models.strong]\nprovider = "scripted"\nreplies = "judge.json"\n'
        'request_log = "judge-requests.jsonl"\n'
    )
    goal = setup(home, {"plan": [PLAN], "generate": [draft("v1")], "judge": ["never used"]},
                 build_extra='judge_model = "strong"', extra_models=extra_models)  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go")
    await serve()
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    assert requests(home, "judge") == []
    strong = (home.root / "judge-requests.jsonl").read_text().splitlines()
    assert len(strong) == 1


def test_spec_rejects_bad_input() -> None:
    from agentd.errors import UsageError

    for bad in (("", []), ("x" * 5000, []), ("ok", [" "]), ("ok", ["y" * 600])):
        with pytest.raises(UsageError):
            build_spec.make_spec(*bad)


def test_merge_verdict_needs_an_answer_for_every_requirement() -> None:
    reqs = build_spec.requirement_list({"requirements": ["a", "b"]}, "why", [], [])
    judged = {"requirements": [{"id": "R1", "pass": True, "evidence": "x"}],
              "serves_why": {"pass": True}}  # fmt: skip
    v = build_spec.merge_verdict(reqs, judged, {}, "x")
    assert v["failing"] == ["R2"] and not v["passed"]
    assert next(f for f in v["findings"] if f["id"] == "R1")["quoted"] is True


async def test_a_run_starts_a_build_through_the_harness(home: Home, serve: Any) -> None:
    """`build` is an action on the menu: decided, checked by the harness (here: approval), and
    only then does a build run start beside the deciding run, which goes on."""
    home.write_config(
        """
        [daemon]
        poll_interval_s = 0.05

        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [agents.default]
        actions = ["build", "finish"]
        policy = { rules = { build = "approve" } }
        """,
        replies={  # type: ignore[arg-type]
            "decide": [
                {"reason": "a report helps", "action": {"kind": "build",
                 "request": "an incident report", "requirements": ["has a timeline"]}},
                {"reason": "asked for it", "action": {"kind": "finish",
                 "outcome": "succeeded", "summary": "report under way"}},
            ],
            "plan": [PLAN], "generate": [draft("# Report\n## Timeline\n- 12:00")],
            "judge": [verdict(n=1)],
        },
    )  # fmt: skip
    goal = home.add_goal(title="keep web healthy")
    run = home.start_run(goal)
    await serve()
    await wait_for(waiting(home, run))
    assert home.store.read(lambda c: qa.list_artifacts(c)) == []  # nothing before approval
    [approval] = home.store.read(lambda c: qi.list_items(c, status="open"))
    assert approval.kind == InboxKind.APPROVAL and approval.action == "build"
    from agentd import config
    from agentd.operator import inbox

    inbox.approve(home.store, config.load(home.paths.config), approval.item_id)
    await wait_for(finished(home, run))
    act = next(s for s in home.steps(run) if s.kind == StepKind.ACT)
    build_run = int(act.result["build_run"])
    await wait_for(finished(home, build_run))
    assert home.run(build_run).status == RunStatus.SUCCEEDED
    assert home.run(build_run).trigger == "build"
    start = home.steps(build_run)[0].data
    assert start["build"]["requirements"] == ["has a timeline"]
    assert start["parent"]["run_id"] == run


async def test_delivering_the_passed_version_is_an_ordinary_gated_action(
    home: Home, serve: Any
) -> None:
    out = home.root / "report.md"
    home.write_config(
        f"""
        [daemon]
        poll_interval_s = 0.05

        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [actions.save]
        type = "command"
        argv = ["sh", "-c", 'printf "%s" "$1" > {out}', "save", "{{text}}"]
        params = {{ text = {{ pattern = "(?s)#.*", max_length = 20000 }} }}

        [agents.default]
        actions = ["save", "finish"]
        policy = {{ rules = {{ save = "approve" }} }}

        [agents.default.build]
        deliver = "save"
        """,
        replies={"plan": [PLAN], "generate": [draft("# Report\nall good")],  # type: ignore[arg-type]
                 "judge": [verdict(n=1)]},
    )  # fmt: skip
    goal = home.add_goal(title="keep web healthy")
    run = start_build(home, goal, "an incident report", "short")
    await serve()
    await wait_for(waiting(home, run))
    assert not out.exists()  # passed, but not written without the approval
    [approval] = home.store.read(lambda c: qi.list_items(c, status="open"))
    assert approval.action == "save" and approval.args == {"text": "# Report\nall good"}
    from agentd import config
    from agentd.operator import inbox

    inbox.approve(home.store, config.load(home.paths.config), approval.item_id)
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    assert out.read_text() == "# Report\nall good"
    assert "delivered by save" in (home.run(run).summary or "")


def cli(home: Home, *args: str) -> Any:
    from typer.testing import CliRunner

    from agentd.cli import app

    return CliRunner().invoke(app, ["--home", str(home.root), *args])


def test_cli_build_artifact_list_show_diff_and_clear_errors(home: Home, tmp_path: Any) -> None:
    home.write_config(
        """
        [models.default]
        provider = "runbook"

        [models.writer]
        provider = "template"

        [agents.default]
        actions = ["finish"]
        """
    )
    goal = home.add_goal(title="keep web healthy")
    refused = cli(home, "build", str(goal), "an incident report")
    assert (
        refused.exit_code == 2 and "runbook" in refused.output and "build] model" in refused.output
    )
    assert cli(home, "build", "99", "x").exit_code == 1  # unknown goal
    assert cli(home, "build", str(goal), "   ").exit_code == 2  # empty request
    missing = cli(home, "build", str(goal), "x", "--from", str(tmp_path / "nope.txt"))
    assert missing.exit_code == 2 and "nope.txt" in missing.output
    assert home.store.read(lambda c: qa.list_artifacts(c)) == []  # nothing was started
    assert "no artifacts yet" in cli(home, "artifact", "list").output
    assert cli(home, "artifact", "show", "1").exit_code == 1
    # A build with versions (written as the daemon would) shows, diffs and lists as JSON.
    run = start_build(home, goal, "a report", "has a timeline")
    for v, text in ((1, "# R\\nline one"), (2, "# R\\nline one\\n## Timeline\\n- 12:00 \\x1b[31m")):
        home.store.write(lambda c, v=v, text=text: qa.add_version(
            c, run_id=run, goal_id=goal, version=v, seq=v + 1, request="a report",
            text=text.encode().decode(
                "unicode_escape"), chars=len(text), model="m"))  # fmt: skip
    shown = cli(home, "artifact", "show", str(run))
    assert shown.exit_code == 0 and "v2 of 2" in shown.output and "not judged yet" in shown.output
    assert "\x1b" not in shown.output and "\\x1b" in shown.output  # model text is inert
    diff = cli(home, "artifact", "diff", str(run), "--json")
    assert json.loads(diff.output)["diff"][-1] == "+- 12:00 \x1b[31m"  # --json keeps it exact
    assert "+## Timeline" in cli(home, "artifact", "diff", str(run)).output
    listed = json.loads(cli(home, "artifact", "list", "--json").output)
    assert listed[0]["artifact"] == run and listed[0]["versions"] == 2
    assert cli(home, "artifact", "show", str(run), "--version", "5").exit_code == 1


async def test_a_check_in_nudge_can_suggest_a_build_and_accepting_starts_it(home: Home) -> None:
    """The outer loop asks why; the inner loop makes the thing: a check-in's nudge suggests
    `build`, the operator accepts, and the accepted decision starts a build through the harness."""
    from agentd.clock import ManualClock
    from agentd.daemon import serve as daemon
    from agentd.db import checkins as qc
    from agentd.db import world as worlds
    from agentd.db.store import Store
    from agentd.inner.driver import BuildDriver
    from agentd.operator import inbox
    from agentd.outer import checkin
    from agentd.runs.engine import RunDriver

    suggestion = {"action": "build", "args": {"request": "a résumé for the saved Acme role",
                                              "requirements": ["one page"]}}  # fmt: skip
    nudge = {"reason": "a new role was saved", "next_look_in_s": None,
             "verdict": {"kind": "nudge", "topic": "Acme résumé", "message": "Tailor the CV.",
                         "suggested": suggestion}}  # fmt: skip
    cfg = home.write_config(
        """
        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [agents.default]
        actions = ["build", "finish"]
        checkin = { quiet = "none" }
        """,
        replies={"checkin": [nudge], "plan": [PLAN], "generate": [draft("# CV")],  # type: ignore[arg-type]
                 "judge": [verdict(n=1)]},
    )  # fmt: skip
    goal = home.store.write(lambda c: q.add_goal(
        c, title="get a backend job", why="to move to Berlin", agent="default",
        criteria=["an offer I accept"], deadline=None))  # fmt: skip
    store = Store(home.paths.db)
    await store.open()
    try:
        deps = daemon.build_deps(cfg, store, owner="test:1")
        t0 = 1_800_000_000.0
        deps.clock = ManualClock(t0)
        home.store.write(lambda c: worlds.add_snapshot(c, "default", None, {"jobs": {"saved": 1}},
                                                       {"jobs": {"saved": [0, 1]}}))  # fmt: skip
        checkin_id = home.store.write(lambda c: qc.add_due(c, goal, t0, t0))
        await checkin.run_checkin(deps, checkin_id, lambda run_id, epoch: None)
        [item] = [i for i in home.store.read(lambda c: qi.list_items(c)) if i.rule == "nudge"]
        assert "agentd inbox accept" in item.body and "build" in item.body
        run = int(inbox.accept(home.store, cfg, item.item_id).data["run_id"])
        drivers: dict[str, type[RunDriver]] = {"build": BuildDriver}
        for run_id in (run, None):
            if run_id is None:  # then the build the accepted decision started
                act = next(s for s in home.steps(run) if s.kind == StepKind.ACT)
                run_id = int(act.result["build_run"])
            epoch = home.store.write(lambda c, r=run_id: leases.claim_run(c, r, "test:1", 60))
            driver = await RunDriver.load(deps, run_id, epoch, drivers)
            while await driver.advance():
                pass
        assert home.run(run_id).status == RunStatus.SUCCEEDED
        assert home.steps(run_id)[0].data["build"]["request"] == "a résumé for the saved Acme role"
        assert [v["status"] for v in versions(home, run_id)] == ["passed"]
    finally:
        await store.close()


async def test_after_a_clarifying_answer_the_first_draft_is_still_no_revision(
    home: Home, serve: Any
) -> None:
    plan = {"reason": "r", "question": "Which role?", "requirements": []}
    goal = setup(home, {"plan": [plan], "generate": [draft("v1"), draft("v2")],
                        "judge": [verdict("R1"), verdict("R2")]}, max_revisions=1)  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go", "one page")
    await serve()
    await wait_for(waiting(home, run))
    [q1] = open_questions(home, run)
    await answer(home, q1.item_id, "the payments role")
    await wait_for(lambda: len(open_questions(home, run)) == 1 and q1.item_id not in
                   [i.item_id for i in open_questions(home, run)])  # fmt: skip
    [q2] = open_questions(home, run)
    assert "version 2" in q2.body and "most revisions allowed" in q2.body  # one revision made
    assert len(versions(home, run)) == 2
    # The judge is told what the operator said; memory is not (a build answer is no check-in's).
    assert "the payments role" in requests(home, "judge")[0]["prompt"]
    assert not any("payments" in m["text"] for m in home.store.read(lambda c: qm.recall(c, goal)))


async def test_deterministic_checks_sections_regex_and_a_validator_command() -> None:
    from agentd.config.build import CommandCheck, Regex, Sections
    from agentd.inner import checks

    text = "# CV\n## The root cause\n```\n## Skills\n```\nSummary: Go at Acme\n"
    sections = checks.run_pure(Sections(kind="sections", sections=["Root cause", "Skills"]), text)
    assert not sections["pass"] and sections["evidence"] == "missing: Skills"  # fenced: no heading
    assert checks.run_pure(Regex(kind="regex", pattern="^Summary"), text)["pass"]
    assert not checks.run_pure(Regex(kind="regex", pattern="Acme", absent=True), text)["pass"]
    ok = CommandCheck(kind="command", argv=["grep", "-q", "Acme", "{file}"])
    bad = CommandCheck(kind="command", argv=["sh", "-c", "echo no Initech >&2; exit 3", "{file}"])
    sandbox: dict[str, Any] = {"env": {"PATH": "/usr/bin:/bin"}, "secrets": {}}
    assert (await checks.run_command(ok, text, None, **sandbox))["pass"]
    failed = await checks.run_command(bad, text, None, **sandbox)
    assert not failed["pass"] and failed["evidence"] == "exit 3: no Initech"
    missing = CommandCheck(kind="command", argv=["/nonexistent/lint", "{file}"])
    evidence = (await checks.run_command(missing, text, None, **sandbox))["evidence"]
    assert evidence.startswith("cannot start '/nonexistent/lint'")


async def test_a_failed_call_after_an_answer_resumes_where_it_was_not_from_the_plan(
    home: Home, serve: Any
) -> None:
    plan = {"reason": "r", "question": "Which role?", "requirements": []}
    goal = setup(home, {
        "plan": [plan],
        "generate": [{"error": "overloaded", "retry_after_s": 0.1, "attempts": 1,
                      "reply": draft("v1")}],
        "judge": [verdict(n=1)],
    }, build_extra="")  # fmt: skip
    run = start_build(home, goal, "a CV", "mentions Go")
    await serve()
    await wait_for(waiting(home, run))
    [q] = open_questions(home, run)
    await answer(home, q.item_id, "backend")
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.SUCCEEDED
    assert [r["purpose"] for r in requests(home)] == ["plan", "generate", "generate", "judge"]
    assert len(home.store.read(lambda c: qi.list_items(c, status=None))) == 2  # question, notice


async def test_a_delivery_its_action_refuses_fails_clearly_and_keeps_the_artifact(
    home: Home, serve: Any
) -> None:
    home.write_config(
        """
        [daemon]
        poll_interval_s = 0.05

        [models.default]
        provider = "scripted"
        replies = "replies.json"

        [actions.save]
        type = "command"
        argv = ["true", "{text}"]
        params = { text = { pattern = "(?s).*" } }

        [agents.default]
        actions = ["save", "finish"]

        [agents.default.build]
        deliver = "save"
        """,
        replies={"plan": [PLAN], "generate": [draft("# Report\\n" + "x" * 300)],  # type: ignore[arg-type]
                 "judge": [verdict(n=1)]},
    )  # fmt: skip
    goal = home.add_goal(title="keep web healthy")
    run = start_build(home, goal, "an incident report", "short")
    await serve()
    await wait_for(finished(home, run))
    assert home.run(run).status == RunStatus.FAILED
    summary = home.run(run).summary or ""
    assert "passed" in summary and "not delivered" in summary and "max_length" in summary
    assert [v["status"] for v in versions(home, run)] == ["passed"]
    assert not any(s.kind == StepKind.ACT for s in home.steps(run))
