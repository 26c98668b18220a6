"""`agentd doctor`: check a home for what would fail at run time — config, database (schema,
`PRAGMA quick_check`; on PostgreSQL the connection, server, session settings, schema and the
daemons serving it), daemon (does it answer, and run the config on disk), models and their API keys,
each source looked at once, the programs actions run, triggers, goals and limits, and URLs that
seem to hold a credential (`doctor_urls`).

It changes nothing (a source is looked at as the daemon would: a command source runs) and returns
a Report that the CLI renders. Secrets are checked for presence only; their values never reach
a message. Whether a program exists is checked here, not when the config loads: a config is often
written or checked on another machine than the one that runs it.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentd import config, llm, sources
from agentd.cli import doctor_hooks, doctor_reach, doctor_store, doctor_urls, doctor_zone
from agentd.cli.doctor_mail import mailbox_said
from agentd.cli.doctor_programs import check_programs, identity, used
from agentd.config import (
    Config,
    ModelConfig,
    OtherModel,
    Paths,
    ScriptedModel,
)
from agentd.db import meta
from agentd.db.sqlite import safety, schema
from agentd.errors import AgentdError, ConfigError, ModelError
from agentd.llm import SUMMARY_SCHEMA, ModelRequest
from agentd.llm.scripted import load_replies
from agentd.operator import daemons as operator_daemons
from agentd.operator import health as operator_health
from agentd.operator import home as operator_home
from agentd.operator import liveness
from agentd.operator import store_health as operator_store
from agentd.text import url_shown
from agentd.views.records import Check

# Sources whose look is a bounded local read (the tail of a file: no network, no child process),
# so cheap that `agentd reload` looks at them too.
LOCAL_SOURCES = frozenset({"file_tail"})
LOADED_CONFIG_KEY = "loaded_config_sha256"  # written by the daemon at start and each reload
SOURCE_GRACE_S = 5.0  # on top of a source's own timeout
EVENTS_LOOKED_AT = 1000


@dataclass(frozen=True)
class Report:
    """Every finding for one home; healthy when each required check passed."""

    home: str
    checks: list[Check]
    config: Config | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    @property
    def exit_code(self) -> int:
        """0 healthy; 2 the config file is invalid (as for every config error); 1 otherwise."""
        if self.config is None and any(c.name == "config" and not c.ok for c in self.checks):
            return ConfigError.exit_code
        return 0 if self.ok else 1

    def with_checks(self, more: list[Check]) -> Report:
        return Report(self.home, self.checks + more, self.config)

    def as_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "home": self.home, "checks": [c._asdict() for c in self.checks]}


def examine(paths: Paths, daemon_pid: int | None) -> Report:
    """Check the home at `paths`; `daemon_pid` is who holds its lock (-1: someone, pid unknown).
    What needs the network or a child process (sources, pings) is `probe`'s."""
    cfg: Config | None = None
    try:
        cfg = config.load(paths.config)
        counts = f"{len(cfg.agents)} agent(s), {len(cfg.models)} model(s)"
        checks = [Check("config", True, f"{paths.config}: valid; {counts}")]
    except AgentdError as e:
        checks = [Check("config", False, str(e))]
    shared = doctor_store.check_shared_store(paths)  # None: the SQLite file in the home
    checks += check_database(paths) if shared is None else shared
    readable = paths.db.exists() if shared is None else operator_store.served(shared)
    checks.append(check_daemon(liveness.probe(paths, daemon_pid)))
    checks += doctor_store.check_clock(paths) if readable else []
    if cfg is not None:
        loaded = check_loaded_config(paths, daemon_pid, shared=shared is not None)
        checks += [loaded] if loaded is not None else []
        sees = doctor_reach.daemon_sees(paths, cfg, daemon_pid)
        models = [check_model(n, m, sees) for n, m in cfg.models.items()]
        checks += models or [Check("models", False, "no [models.NAME] configured")]
        checks += check_programs(cfg, identity(daemon_pid))
        checks += check_limits(cfg)
        checks += doctor_zone.check_zone(cfg)
        checks += check_goals_and_triggers(paths, cfg, readable=readable)
        checks += doctor_reach.check_notify(paths, cfg, sees, readable=readable)
        checks += doctor_urls.check_urls(cfg)
        checks += doctor_hooks.check_hooks(cfg, sees)
        checks += doctor_reach.check_web(paths, cfg, daemon_pid)
    return Report(str(paths.home), checks, cfg)


def check_database(paths: Paths) -> list[Check]:
    if not paths.db.exists():
        return [Check("database", False, f"{paths.db}: missing; run `agentd init`")]
    try:
        store = operator_home.inspect_store(paths.db)
        try:
            # BEGIN IMMEDIATE takes the write lock (or fails); the empty transaction changes nothing.
            have = store.write(schema.version)
            store.read(lambda c: safety.quick_check(c, paths.db))
        finally:
            store.close()
    except AgentdError as e:
        return [Check("database", False, str(e))]
    want = len(schema.MIGRATIONS)
    advice = (
        "current" if have == want else "run any command to migrate" if have < want else "upgrade"
    )
    migrated = Check("schema", have == want, f"version {have} of {want} ({advice})")
    return [Check("database", True, f"{paths.db}: writable; quick_check ok"), migrated]


def check_daemon(alive: liveness.Daemon) -> Check:
    """A daemon that is not running is information only (a normal state for a home); one that
    holds the home without answering on its socket is a failure: nothing it should do happens."""
    if alive.pid is None:
        return Check("daemon", False, "not running; start it with `agentd serve`", False)
    if alive.silent:
        return Check("daemon", False, f"not responding: {alive.why_silent()}")
    running = f"running (pid {alive.pid if alive.pid > 0 else 'unknown'})"
    if alive.liveness == liveness.Liveness.UNASKED:  # the lock is all there is to go by
        running += f"; not asked whether it answers: {alive.unasked_why}"
    return Check("daemon", True, running, False)


def check_loaded_config(paths: Paths, pid: int | None, *, shared: bool = False) -> Check | None:
    """Does this host's running daemon use the config on disk? Its own row among the daemons
    serving the database says what it loaded (on a shared store each daemon loads its own: the
    home-wide record is only the last to load's, an older daemon's fallback). Information: an
    edit not yet reloaded is normal for a moment, but what doctor just checked is not what runs.
    None: nothing to say (no daemon, or one that recorded no config). `shared`: the state is in
    a database server, not the home's file."""
    if pid is None or not (shared or paths.db.exists()):
        return None
    try:
        store = operator_home.inspect_store(paths.db)
        try:
            mine = [d for d in operator_daemons.serving(store)["daemons"]
                    if d["host"] == socket.gethostname() and d["pid"] == pid
                    and d["state"] != "stopped"]  # fmt: skip
            loaded = (mine[0]["config_sha256"] if mine else None) or store.read(
                lambda c: meta.get_meta(c, LOADED_CONFIG_KEY)
            )
        finally:
            store.close()
        on_disk = hashlib.sha256(paths.config.read_bytes()).hexdigest()
    except (AgentdError, OSError):
        return None  # the database and config checks report it
    if not loaded:
        return None
    if loaded == on_disk:
        return Check("config loaded", True, f"the daemon (pid {pid}) runs the config on disk")
    return Check(
        "config loaded",
        False,
        f"{paths.config} is not what the daemon (pid {pid}) loaded; apply it with `agentd "
        "reload` (it waits for the daemon's verdict and names any error)",
        False,
    )


def check_model(name: str, model: ModelConfig, sees: doctor_reach.Sees = None) -> Check:
    label = f"model {name}"
    if isinstance(model, ScriptedModel):
        try:
            count = len(load_replies(model.replies))
        except AgentdError as e:
            return Check(label, False, str(e))
        return Check(label, True, f"scripted; replies {model.replies} ({count})")
    if not isinstance(model, OtherModel):  # an embedded decider (runbook): nothing to reach
        return Check(label, True, f"{model.provider}: built in; needs no API key")
    what, env = f"{model.provider} {model.model}", model.api_key_env
    if env is None:
        return Check(label, True, f"{what}: no api_key_env configured")
    missing = doctor_reach.unseen_secret(env, sees)  # the value itself is never shown
    if missing is not None:
        return Check(label, False, f"{what}: {missing}")
    return Check(label, True, f"{what}: ${env} {doctor_reach.seen_where(env)}")


# ── limits, goals and triggers ───────────────────────────────────────────────────────────────


def _negatives(node: Any, key: str) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _negatives(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, bool):
        return
    elif isinstance(node, int | float) and node < 0:
        yield f"{key} = {node}"


def check_limits(cfg: Config) -> list[Check]:
    """No limit, budget, timeout or size in the config is negative (the config validates most;
    this also covers any it does not)."""
    found = list(_negatives(cfg.model_dump(mode="json"), ""))
    if found:
        return [Check("limits", False, "negative: " + "; ".join(found))]
    return [Check("limits", True, "no negative limit in the config")]


def check_goals_and_triggers(
    paths: Paths, cfg: Config, *, readable: bool | None = None
) -> list[Check]:
    """Goals whose agent is gone or whose cadence is negative, and triggers no event carries.
    `readable`: whether the home's database can be read (default: its SQLite file exists)."""
    if not (paths.db.exists() if readable is None else readable):
        return []
    try:
        store = operator_home.inspect_store(paths.db)
        try:
            goals, cadences, names = operator_health.goal_facts(store, EVENTS_LOOKED_AT)
        finally:
            store.close()
    except AgentdError:
        return []  # the database check reports it
    checks = []
    for goal in goals:
        if goal.agent not in cfg.agents:
            msg = (
                f"goal {goal.goal_id} ({goal.status}) names agent {goal.agent!r}, gone from "
                f"the config: its runs fail; restore the agent or "
                f"`agentd goal close {goal.goal_id}`"
            )
            checks.append(Check(f"goal {goal.goal_id}", False, msg))
        bad = [f"{k} = {v:g}" for k, v in cadences.get(goal.goal_id, {}).items() if v < 0]
        if bad:
            msg = f"goal {goal.goal_id}: negative cadence {', '.join(bad)}; set it again"
            checks.append(Check(f"goal {goal.goal_id}", False, msg))
    checks += _trigger_checks(cfg, names)
    return checks


def _trigger_checks(cfg: Config, seen: set[str]) -> list[Check]:
    """A trigger on a source's state is emitted by its watcher (the config checks that one
    exists); any other name only by `agentd event send`: say so when none was ever seen."""
    checks = []
    for name, agent in cfg.agents.items():
        for trigger in agent.triggers:
            label = f"trigger {name}"
            named = cfg.state_trigger(trigger)
            if named is not None:
                by = ", ".join(cfg.watchers(named[0]))
                checks.append(Check(label, True, f"{trigger!r}: emitted by watching agent {by}"))
            elif trigger in seen:
                checks.append(Check(label, True, f"{trigger!r}: sent before"))
            else:
                msg = (
                    f"{trigger!r}: nothing in agentd emits it and none was sent yet; only "
                    f"`agentd event send {trigger}` starts this agent (a typo of a source "
                    f"state? those are SOURCE.healthy, SOURCE.unhealthy, SOURCE.check_failed)"
                )
                checks.append(Check(label, False, msg, False))
    return checks


# ── probes: sources looked at once, models pinged (concurrently) ─────────────────────────────


async def probe(report: Report, *, with_ping: bool = False) -> Report:
    """Look at each source once and, with `ping`, ask each model for a tiny reply — all at
    once, whatever the other checks found (a ping helps most when something else fails)."""
    cfg = report.config
    if cfg is None:
        return report
    looks = check_sources(cfg)
    pings = ping(cfg) if with_ping else _nothing()
    found = await asyncio.gather(looks, pings)
    return report.with_checks([c for group in found for c in group])


async def _nothing() -> list[Check]:
    return []


async def check_sources(cfg: Config, types: frozenset[str] | None = None) -> list[Check]:
    """Look at each source once (only those of `types`, when given) and say what doctor says."""
    built = {
        n: sources.build(n, s, config.base_env())
        for n, s in cfg.sources.items()
        if types is None or s.type in types
    }

    _actions, in_use = used(cfg)

    async def one(name: str) -> Check:
        limit_s = getattr(cfg.sources[name], "timeout_s", 0.0) + SOURCE_GRACE_S
        raw = await sources.observe_all([built[name]], timeout_s=limit_s)
        check = _source_check(name, raw[name])
        url = getattr(cfg.sources[name], "url", None)
        if not check.ok and url and "unhealthy" in check.message:  # down, failing, or mistyped
            starts = _started_by(cfg, name, sources.state_of(raw[name]))
            said = _http_advice(raw[name], url, cfg.watchers(name), starts)
            check = check._replace(
                message=f"{check.message} at {url_shown(url)}: {said}", warning=bool(starts)
            )
        if name in in_use or check.ok:
            return check
        return check._replace(message=check.message + " (no agent uses it yet)", required=False)

    return list(await asyncio.gather(*(one(n) for n in built)))


def _started_by(cfg: Config, source: str, state: str | None) -> list[str]:
    """The agents a run of which starts when a watcher sees `source` in `state`: those with the
    trigger `<source>.<state>` (watching alone only records the state)."""
    if not cfg.watchers(source):
        return []
    return sorted(
        name
        for name, agent in cfg.agents.items()
        if any(cfg.state_trigger(t) == (source, state) for t in agent.triggers)
    )


def _http_advice(obs: Any, url: str, watchers: list[str], starts: list[str]) -> str:
    """What an unhealthy look at `url` means, by what answered: a server's 5xx is the service
    failing, a 4xx most likely a wrong path, silence (refused, timed out) a service that is down
    or a wrong host or port. For a watched source, whether a run starts on it (only an agent
    with the trigger `<source>.<state>` starts one)."""
    status = obs.get("status") if isinstance(obs, dict) else None
    if isinstance(status, int) and status >= 500:
        said = "the server answers, but reports an error: the service is up and failing"
    elif isinstance(status, int) and status >= 400:
        said = f"the server answers {status}: check the URL's path (and any credential it needs)"
    elif isinstance(status, int):
        said = f"the server answers {status}, which the source does not count as healthy"
    else:
        said = "nothing answered there: the service is down, or check the URL's host and port"
    if starts:
        whose = "" if starts == watchers else f" of {', '.join(starts)}"
        said += f"; {', '.join(watchers)} watches it, so a run{whose} starts on this"
    elif watchers:
        said += f"; {', '.join(watchers)} watches it, but no agent's trigger starts a run on it"
    return said


def _source_check(name: str, obs: Any) -> Check:
    label = f"source {name}"
    state = sources.state_of(obs)
    error = obs.get("error") if isinstance(obs, dict) else None
    if state == config.CHECK_FAILED:
        return Check(label, False, f"check failed, the look cannot be made: {error}")
    if state == config.UNHEALTHY:
        symptom = f"HTTP {obs['status']}" if "status" in obs else error or "not ok"
        return Check(label, False, f"looked once: unhealthy ({symptom})", False)
    if state is None and error:
        return Check(label, False, f"looked once: {error}", False)
    detail = f"HTTP {obs['status']}" if isinstance(obs, dict) and "status" in obs else "ok"
    if isinstance(obs, dict) and "mailbox" in obs:  # an imap source: logged in, read-only
        detail = mailbox_said(obs)
    return Check(label, True, f"looked once: {detail}")


async def ping(cfg: Config, timeout_s: float | None = None) -> list[Check]:
    """Ask every configured model, concurrently, for a tiny reply (a summary request: it costs
    a few tokens and consumes no scripted decision), each within its own timeout_s unless one
    is given. Reports latency and the structured-output mode the server accepted, or the
    provider's error without secrets — naming the URL when the connection failed."""
    names = list(cfg.models)

    def limit(n: str) -> float:
        return timeout_s if timeout_s is not None else config.call_timeout_s(cfg.models[n])

    return list(await asyncio.gather(*(_ping_one(n, cfg.models[n], limit(n)) for n in names)))


async def _ping_one(name: str, model_cfg: ModelConfig, timeout_s: float) -> Check:
    request = ModelRequest(
        run_id=0, goal_id=0, decision_no=0, attempt=1, purpose="summarize",
        system='Reply with JSON {"summary": "pong"}.', prompt="ping", schema=SUMMARY_SCHEMA,
    )  # fmt: skip
    label = f"ping {name}"
    started = time.monotonic()
    model = None
    try:
        model = llm.build(name, model_cfg)
        async with asyncio.timeout(timeout_s):
            reply = await model.complete(request)
    except TimeoutError:
        return Check(label, False, f"no answer within {timeout_s:g}s{_at(model_cfg)}")
    except ModelError as e:
        return Check(label, False, f"{e}{_at(model_cfg)}")
    except AgentdError as e:
        return Check(label, False, str(e))
    finally:
        closing = getattr(model, "aclose", None)
        if closing is not None:
            await closing()
    ms = (time.monotonic() - started) * 1000
    mode = getattr(model, "structured_output", None)
    accepted = f" (structured output: {mode})" if mode else ""
    return Check(label, True, f"{reply.model} answered in {ms:.0f} ms{accepted}")


def _at(model_cfg: ModelConfig) -> str:
    """Where a network model was called: its base_url, else its provider's API."""
    if not isinstance(model_cfg, OtherModel):
        return ""
    if model_cfg.base_url:
        return f" (at {model_cfg.base_url})"
    if model_cfg.provider == "anthropic":
        from agentd.llm.anthropic import DEFAULT_BASE_URL as anthropic_url

        return f" (at {anthropic_url})"
    from agentd.llm.openai import DEFAULT_BASE_URL as openai_url

    return f" (at {openai_url})"
