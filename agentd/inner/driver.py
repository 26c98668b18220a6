"""The build run: plan → generate → judge → revise, one journaled step at a time.

    START ─► PLAN (requirements fixed; a clarifying question? → WAIT for the answer)
          ─► GENERATE v1 ─► JUDGE v1 ─┬─ passed ─► (deliver through the harness) ─► FINISH
                                       ├─ fails ─► GENERATE v2 (sees v1 and the findings) ─► …
                                       └─ needs info / stuck (same failures twice) / bound
                                          reached ─► one specific question ─► WAIT ─► answer ─►
                                          GENERATE (the answer is guidance) … or "stop"

Like a decision, a model reply is journaled with its step (a GENERATE step and its artifact version
in one transaction; a JUDGE step and the version's verdict in one), so a restart never asks a model
again for a journaled step. A failed model call sleeps durably (the engine's backoff); invalid
replies are re-asked with the error, bounded. Budgets apply to every call. Delivering the passed
version is an ordinary action on the agent's menu, decided here and checked by the harness.
"""

from __future__ import annotations

from typing import Any

import structlog

from agentd.db import artifacts as qa
from agentd.db import memory as qm
from agentd.db import queries as q
from agentd.errors import ModelOutputInvalid
from agentd.inner import checks, prompts, spec
from agentd.inner.calls import BuildCalls, retry_step
from agentd.models import (
    JSON,
    InboxKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Verdict,
    action_digest,
)

log = structlog.get_logger("agentd.build")


class BuildDriver(BuildCalls):
    """A run whose trigger is `build`: it makes an artifact instead of deciding actions."""

    @property
    def spec(self) -> JSON:
        return dict(self.steps[0].data.get("build") or {})

    # ── the state machine ─────────────────────────────────────────────────────────────────────

    async def advance(self) -> bool:
        last = self.steps[-1]
        if last.kind in (StepKind.WAIT, StepKind.FINISH):
            return False
        if last.kind == StepKind.WAKE and not retry_step(last):
            await self.after_wake(last)
            return True
        basis = next(s for s in reversed(self.steps) if not retry_step(s))
        await self._after(basis)
        return True

    async def _after(self, last: Step) -> None:
        """The next step after `last` (a model_retry wait and wake are looked past)."""
        kind, ok = last.kind, last.status == StepStatus.DONE
        if kind == StepKind.START:
            await self.plan()
        elif kind == StepKind.PLAN:
            await (self._after_plan(last) if ok else self._invalid(StepKind.PLAN))
        elif kind == StepKind.GENERATE:
            await (self.judge() if ok else self._invalid(StepKind.GENERATE))
        elif kind == StepKind.JUDGE:
            await (self.after_judge(last) if ok else self._invalid(StepKind.JUDGE))
        elif kind == StepKind.DECIDE and last.status == StepStatus.STARTED:
            await self.settle_decision(last)
        elif kind == StepKind.DECIDE:
            await self.check(last)
        elif kind == StepKind.CHECK:
            await self.after_check(last)
        elif kind == StepKind.ACT and last.status == StepStatus.STARTED:
            await self.recover_act(last)
        elif kind == StepKind.ACT:
            await self._delivered(last)
        elif kind == StepKind.WAKE:  # an answer whose next call failed and was retried
            await self.after_wake(last)
        else:
            await self.finish(RunStatus.FAILED, f"build cannot go on after a {kind} step")

    async def after_wake(self, woke: Step) -> None:
        why = woke.data
        if why.get("item_kind") == InboxKind.APPROVAL:
            if why.get("status") == "approved":
                await self.act(why["action"], why["args"], approval=why["item_id"])
            else:
                await self.finish(RunStatus.FAILED, f"{self._ready()} — delivery "
                                  f"{why.get('action')} was {why.get('status')}")  # fmt: skip
            return
        answer = str(why.get("answer") or "")
        if why.get("status") != "answered":
            await self.finish(
                RunStatus.FAILED,
                f"build stopped: the question was {why.get('status')} ({answer[:200]})"
                + (f"; best version v{self._version()} kept" if self._version() else ""),
            )
        elif spec.read_answer(answer) == "stop":
            await self.finish(RunStatus.CANCELLED, "build stopped by the operator"
                              + (f"; v{self._version()} kept" if self._version() else ""))  # fmt: skip
        elif self._before_wait().kind == StepKind.JUDGE and self._before_wait().status == (
            StepStatus.ERROR
        ):
            await self.judge()  # the judge's replies were invalid: judge again, same version
        else:
            await self.generate()

    def _before_wait(self) -> Step:
        return next(s for s in reversed(self.steps) if s.kind not in (StepKind.WAIT, StepKind.WAKE))

    # ── plan ──────────────────────────────────────────────────────────────────────────────────

    def _check_requirements(self) -> list[JSON]:
        return checks.requirements(self.bcfg.checks)

    async def plan(self) -> None:
        s = self.spec
        if not self.bcfg.plan:
            reqs = spec.requirement_list(s, self.goal.why, [], self._check_requirements())
            await self._append(StepKind.PLAN, data={"requirements": reqs, "question": None})
            return
        memory = await self.deps.store.read(lambda c: qm.recall(c, self.goal_id))
        system, text = prompts.plan(self.goal, s, memory, self._feedback(StepKind.PLAN))
        reply = await self._call("plan", self._generator(), system, text, prompts.PLAN_SCHEMA,
                                 {"spec": s, "memory": memory})  # fmt: skip
        if reply is None:
            return
        meta = self._meta(reply, StepKind.PLAN)
        try:
            value = await self._parse(reply, ("requirements", "question"))
            extracted = value["requirements"]
            if not isinstance(extracted, list):
                raise ValueError("requirements must be a list")
            question = value.get("question")
            if question is not None and not isinstance(question, str):
                raise ValueError("question must be a string or null")
        except ValueError as e:
            await self._invalid_reply(StepKind.PLAN, meta, reply, str(e))
            return
        extracted = [r for r in extracted if isinstance(r, dict)]
        reqs = spec.requirement_list(s, self.goal.why, extracted, self._check_requirements())
        question = (question or "").strip()[:1000] or None
        data = {**meta, "requirements": reqs, "question": question,
                "reason": str(value.get("reason", ""))[:1000]}  # fmt: skip
        await self._append(StepKind.PLAN, data=data, **self._tokens(reply))

    async def _after_plan(self, planned: Step) -> None:
        question = planned.data.get("question")
        if question:
            await self.ask_operator(
                f'Before building "{self.spec["request"][:200]}": {question} '
                '(answer, or say "use your judgement"; "stop" ends the build)',
                why="build_clarify",  # not a check-in's "clarify": that one goes to memory
            )
        else:
            await self.generate()

    # ── generate ──────────────────────────────────────────────────────────────────────────────

    def _requirements(self) -> list[JSON]:
        plan = next(s for s in reversed(self.steps) if s.kind == StepKind.PLAN and s.data.get(
            "requirements") is not None)  # fmt: skip
        return list(plan.data["requirements"])

    def _version(self) -> int:
        return sum(
            1 for s in self.steps if s.kind == StepKind.GENERATE and s.status == StepStatus.DONE
        )

    def _guidance(self) -> list[str]:
        """Operator answers that carry information (not "use your judgement"), newest last."""
        said = [
            str(s.data.get("answer") or "")
            for s in self.steps
            if s.kind == StepKind.WAKE and s.data.get("item_kind") == InboxKind.QUESTION
            and s.data.get("status") == "answered"
        ]  # fmt: skip
        return [a for a in said if spec.read_answer(a) == "guidance"][-spec.MAX_GUIDANCE :]

    def _last_judged(self) -> JSON | None:
        judged = next((s for s in reversed(self.steps) if s.kind == StepKind.JUDGE
                       and s.status == StepStatus.DONE), None)  # fmt: skip
        return None if judged is None else judged.data

    async def generate(self) -> None:
        version = self._version() + 1
        judged = self._last_judged()
        previous: JSON | None = None
        if judged is not None:
            row = await self.deps.store.read(
                lambda c: qa.get_version(c, self.run_id, int(judged["version"]))
            )
            previous = {"text": row["text"], "version": row["version"],
                        "verdict": judged["verdict"]}  # fmt: skip
        memory = await self.deps.store.read(lambda c: qm.recall(c, self.goal_id))
        reqs = self._requirements()
        system, text = prompts.generate(
            self.goal, self.spec, reqs, memory, self._guidance(), previous,
            self._feedback(StepKind.GENERATE),
        )  # fmt: skip
        context = {"spec": self.spec, "requirements": reqs, "guidance": self._guidance(),
                   "previous": previous, "version": version}  # fmt: skip
        reply = await self._call("generate", self._generator(), system, text,
                                 prompts.GENERATE_SCHEMA, context)  # fmt: skip
        if reply is None:
            return
        meta = self._meta(reply, StepKind.GENERATE)
        try:
            value = await self._parse(reply, ("artifact",))
            artifact = value["artifact"]
            if not isinstance(artifact, str) or not artifact.strip():
                raise ValueError("artifact must be a non-empty string")
        except ValueError as e:
            await self._invalid_reply(StepKind.GENERATE, meta, reply, str(e))
            return
        bound = self.bcfg.max_artifact_chars
        data = {**meta, "version": version, "chars": len(artifact), "cut": len(artifact) > bound,
                "notes": str(value.get("notes", ""))[:1000], "revision": previous is not None}  # fmt: skip
        seq = len(self.steps) + 1

        def write(c: Any) -> Step:
            step = q.append_step(c, self.run_id, self.epoch, StepKind.GENERATE, seq=seq,
                                 data=data, **self._tokens(reply))  # fmt: skip
            qa.add_version(c, run_id=self.run_id, goal_id=self.goal_id, version=version, seq=seq,
                           request=str(self.spec.get("request", "")), text=artifact[:bound],
                           chars=len(artifact), model=reply.model)  # fmt: skip
            return step

        self.steps.append(await self._write(write))
        log.info("build.generated", version=version, chars=len(artifact))

    # ── judge ─────────────────────────────────────────────────────────────────────────────────

    async def judge(self) -> None:
        version = self._version()
        row = await self.deps.store.read(lambda c: qa.get_version(c, self.run_id, version))
        text: str = row["text"]
        reqs = self._requirements()
        checked = await checks.run_all(self.bcfg, reqs, text, self.deps.config)
        if row["chars"] > len(text):  # cut to the bound: that alone fails
            checked["size"] = {"pass": False, "evidence": f"{row['chars']} characters, cut",
                               "fix": f"keep it under {self.bcfg.max_artifact_chars}"}  # fmt: skip
        system, prompt_text = prompts.judge(
            self.goal, self.spec, reqs, text, self._guidance(), self._feedback(StepKind.JUDGE)
        )
        context = {"spec": self.spec, "requirements": reqs, "artifact": text, "version": version,
                   "goal": {"title": self.goal.title, "why": self.goal.why}}  # fmt: skip
        name = self.bcfg.judge_model or self._generator()
        reply = await self._call("judge", name, system, prompt_text, prompts.JUDGE_SCHEMA, context)
        if reply is None:
            return
        meta = self._meta(reply, StepKind.JUDGE)
        try:
            value = await self._parse(reply, ("requirements", "serves_why"))
            if not isinstance(value["requirements"], list):
                raise ValueError("requirements must be a list")
            if not isinstance(value["serves_why"], dict):
                raise ValueError("serves_why must be an object")
        except ValueError as e:
            await self._invalid_reply(StepKind.JUDGE, meta, reply, str(e))
            return
        verdict = spec.merge_verdict(reqs, value, checked, text)
        if "size" in checked:
            verdict["findings"].append({"id": "size", "text": "Within the size bound",
                                        "source": "check", "by": "check", "pass": False,
                                        "needs_info": False, "quoted": False,
                                        **checked["size"]})  # fmt: skip
            verdict["failing"].append("size")
            verdict["passed"] = False
        data = {**meta, "version": version, "verdict": verdict}
        seq = len(self.steps) + 1

        def write(c: Any) -> Step:
            step = q.append_step(c, self.run_id, self.epoch, StepKind.JUDGE, seq=seq, data=data,
                                 **self._tokens(reply))  # fmt: skip
            qa.judge_version(c, self.run_id, version, verdict, verdict["passed"])
            return step

        self.steps.append(await self._write(write))
        log.info("build.judged", version=version, passed=verdict["passed"],
                 failing=verdict["failing"])  # fmt: skip

    async def after_judge(self, judged: Step) -> None:
        verdict: JSON = judged.data["verdict"]
        version = int(judged.data["version"])
        if verdict["passed"]:
            await self._passed(version, verdict)
            return
        since = self._since_answer()
        earlier = [s.data["verdict"] for s in since if s.kind == StepKind.JUDGE
                   and s.status == StepStatus.DONE and s is not judged]  # fmt: skip
        drafts = sum(
            1 for s in since if s.kind == StepKind.GENERATE and s.status == StepStatus.DONE
        )
        before = self.steps[: len(self.steps) - len(since)]
        first_is_here = not any(
            s.kind == StepKind.GENERATE and s.status == StepStatus.DONE for s in before
        )
        revisions = drafts - (1 if first_is_here else 0)  # the first draft is no revision
        why: str | None = None
        if any(f["needs_info"] for f in verdict["findings"] if not f["pass"]):
            why = "needs_info"
        elif spec.stuck(earlier[-1] if earlier else None, verdict):
            why = "stuck"
        elif revisions >= self.bcfg.max_revisions:
            why = "bound"
        if why is None:
            await self.generate()
            return
        log.warning("build.escalated", version=version, why=why, failing=verdict["failing"])
        question = spec.escalation_question(self.run_id, version, verdict, why)
        await self.ask_operator(question, why=f"build_{why}")

    def _since_answer(self) -> list[Step]:
        """The steps after the operator's last answer to this build (all, if none)."""
        for i in range(len(self.steps) - 1, -1, -1):
            s = self.steps[i]
            if s.kind == StepKind.WAKE and s.data.get("item_kind") == InboxKind.QUESTION:
                return self.steps[i + 1 :]
        return self.steps

    # ── passing and delivering ────────────────────────────────────────────────────────────────

    def _ready(self) -> str:
        judged = self._last_judged() or {}
        summary = (judged.get("verdict") or {}).get("summary") or "all requirements pass"
        return (
            f"artifact {self.run_id} v{judged.get('version', self._version())} passed "
            f"({self.spec.get('request', '')[:80]}): {summary}"
        )

    async def _passed(self, version: int, verdict: JSON) -> None:
        deliver = self.bcfg.deliver
        if deliver is None:
            await self.finish(RunStatus.SUCCEEDED, self._ready())
            return
        row = await self.deps.store.read(lambda c: qa.get_version(c, self.run_id, version))
        # The run that asked for the build gave the delivery's other arguments (a reply's
        # recipients and subject); the text is always the passed artifact's.
        given = dict(self.spec.get("deliver_args") or {})
        args = {**given, self.bcfg.deliver_param: row["text"]}
        try:  # the action's own parameter rules (length, pattern) hold for a delivery too
            args = self.menu.validate_args(deliver, args)
        except (ModelOutputInvalid, KeyError) as e:
            if given:  # the run's arguments may be what is refused (a recipient, a subject)
                await self.finish(RunStatus.FAILED, f"{self._ready()} — not delivered: {deliver} "
                                  f"refuses the run's deliver_args with this text ({e})")  # fmt: skip
                return
            await self.finish(
                RunStatus.FAILED,
                f"{self._ready()} — not delivered: {deliver}'s parameter "
                f"{self.bcfg.deliver_param!r} refuses this text ({e}); raise its max_length "
                "(and allow_leading_dash) in the config, then deliver it by hand: "
                f"agentd artifact show {self.run_id} --json",
            )
            return
        digest = action_digest(deliver, args)
        reply = f"build: deliver artifact {self.run_id} v{version}"
        step = await self._append(
            StepKind.DECIDE, action=deliver, args=args, digest=digest,
            data={"model": "build (deliver)", "reason": reply, "decision_no": 0},
        )  # fmt: skip
        log.info("build.delivering", action=deliver, step=step.seq)

    async def after_check(self, checked: Step) -> None:
        if checked.verdict == Verdict.DENY:
            await self.finish(RunStatus.FAILED, f"{self._ready()} — delivery {checked.action} "
                              f"refused: {checked.data.get('rule')}")  # fmt: skip
            return
        await super().after_check(checked)

    async def _delivered(self, acted: Step) -> None:
        ok = acted.status == StepStatus.DONE
        result = acted.result or {}
        detail = "" if ok else f" — delivery {acted.action} failed: {result.get('error', '')}"
        await self.finish(
            RunStatus.SUCCEEDED if ok else RunStatus.FAILED,
            self._ready() + (f"; delivered by {acted.action}" if ok else detail),
        )

    async def _invalid(self, kind: StepKind) -> None:
        invalid = self._trailing(
            lambda s: s.kind == kind and s.status == StepStatus.ERROR, retry_step
        )
        if invalid < self.bcfg.max_invalid:
            await {StepKind.PLAN: self.plan, StepKind.GENERATE: self.generate,
                   StepKind.JUDGE: self.judge}[kind]()  # fmt: skip
            return
        if kind == StepKind.PLAN:  # no usable plan: build from the explicit requirements
            reqs = spec.requirement_list(self.spec, self.goal.why, [], self._check_requirements())
            await self._append(StepKind.PLAN, data={"requirements": reqs, "question": None,
                                                    "fallback": "invalid plans"})  # fmt: skip
            return
        await self.ask_operator(
            f"Build {self.run_id}: the model gave {invalid} invalid {kind} replies in a row; "
            f"last error: {self.steps[-1].data.get('error')}. Answer to let it try again, or "
            '"stop".',
            why="invalid_output",
        )
