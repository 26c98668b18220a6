"""The daemon's lifecycle: lock the home, migrate, recover, run the root tasks, stop cleanly.

`serve` holds an exclusive lock on the home (a second daemon exits at once), resumes every run that
was executing, lets the scheduler re-match waits (answers committed while down apply now), records
the check-ins that fell due while it was down (agentd/outer/service.py), tells systemd READY, and on
SIGTERM/SIGINT takes no new step and lets steps in flight reach their journal. SIGHUP, or
`agentd reload` over the control socket (which hears the verdict), reloads the config (validated
first; a bad one is logged and the old one kept). A database that keeps failing stops the systemd
watchdog and ends the process with exit code 1, so systemd restarts it (and the start's `PRAGMA
quick_check` then says what is wrong) instead of it logging errors forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import fcntl
import hashlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import structlog

from agentd import actions, config, llm, sources
from agentd.api import openfiles
from agentd.api.server import ApiServer
from agentd.clock import Clock
from agentd.config import Config, Paths
from agentd.daemon import clocks, mail, metering, sdnotify
from agentd.daemon.leases import LeaseKeeper
from agentd.daemon.retention import retention
from agentd.daemon.scheduler import Scheduler
from agentd.daemon.watchdog import watchdog
from agentd.db import accounting, faults, leases, meta
from agentd.db import queries as q
from agentd.db.artifacts import BUILD_TRIGGER
from agentd.db.store import Store
from agentd.errors import AgentdError, DaemonRunning, StateError
from agentd.inner.driver import BuildDriver
from agentd.llm import Model
from agentd.notify.sender import Sender
from agentd.outer.service import Outer
from agentd.outside import process
from agentd.runs.deps import Deps
from agentd.runs.engine import Engine

if TYPE_CHECKING:
    from agentd.db.postgres.listener import Listener

log = structlog.get_logger("agentd.daemon")


@contextlib.contextmanager
def home_lock(paths: Paths) -> Iterator[None]:
    """Exclusive, crash-safe ownership of a home: an flock on the home directory itself (the
    kernel drops it if the process dies, and deleting a file cannot break it). The pid is
    written to `agentd.lock` for people and `agentd doctor`."""
    try:
        fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise StateError(f"{paths.home}: cannot open the home directory: {e.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DaemonRunning(
                f"another agentd (pid {_recorded_pid(paths)}) is already serving {paths.home}; "
                "stop it first, or use another --home"
            ) from None
        try:
            paths.lock.write_text(f"{os.getpid()}\n")
        except OSError as e:
            raise StateError(
                f"cannot write the pid file: {faults.os_sentence(e, paths.lock)}"
            ) from None
        yield
    finally:
        os.close(fd)


def _recorded_pid(paths: Paths) -> str:
    try:
        return paths.lock.read_text().strip() or "?"
    except OSError:
        return "?"


def daemon_pid(paths: Paths) -> int | None:
    """The pid of the daemon serving this home, or None when none holds the lock."""
    try:
        fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _recorded_pid(paths)
        return int(pid) if pid.isdigit() else -1
    finally:
        os.close(fd)
    return None


def build_deps(cfg: Config, store: Store, owner: str) -> Deps:
    env = config.base_env()
    used_actions = {a for agent in cfg.agents.values() for a in agent.actions}
    used_sources = {s for agent in cfg.agents.values() for s in agent.sources}
    executors = {}
    for name in used_actions:
        ex = actions.build(name, cfg.action(name), env, cfg)
        if ex is not None:
            executors[name] = ex
    return Deps(
        config=cfg,
        store=store,
        models={name: llm.build(name, m) for name, m in cfg.models.items()},
        executors=executors,
        sources={name: sources.build(name, cfg.sources[name], env) for name in used_sources},
        owner=owner,
        lease_s=cfg.store.lease_s,
    )


async def serve(
    paths: Paths,
    cfg: Config,
    *,
    ready: Any = None,
    stop: asyncio.Event | None = None,
    models: dict[str, Model] | None = None,
    clock: Clock | None = None,
    clock_speed: float | None = None,
    clock_start: float | None = None,
) -> int:
    """Run until SIGTERM/SIGINT (or `stop` is set); returns the exit code.

    `ready` (a callable) is told when recovery is done — what systemd hears as READY=1.
    `models` replaces providers built from the config (tests hand in SDK clients on a mock
    transport: the narrowest seam, everything else real). `clock` replaces the wall clock
    (tests); `clock_speed` runs the home's recorded simulated clock N× faster than the wall
    (`serve --clock-speed N`, a testing option: see agentd/outer/timebase.py), from the unix
    time `clock_start` if given (`--clock-start`), else from where it was.
    """
    if clock_start is not None and clock_speed is None:
        raise ValueError("clock_start needs clock_speed")  # the CLI refuses it with a hint
    with home_lock(paths):
        return await _serve_locked(
            paths, cfg, ready, stop or asyncio.Event(), models or {}, clock,
            (clock_speed, clock_start),
        )  # fmt: skip


async def _serve_locked(
    paths: Paths,
    cfg: Config,
    ready: Any,
    stop: asyncio.Event,
    models: dict[str, Model],
    clock: Clock | None,
    scaled: tuple[float | None, float | None],
) -> int:
    started = time.monotonic()
    openfiles.raise_limit()  # systemd's soft 1,024 is for select(); connections need more
    loop = asyncio.get_running_loop()
    hup = asyncio.Event()  # handled from the first instant: the default action of HUP is to die
    loop.add_signal_handler(signal.SIGHUP, hup.set)
    # `kill -USR1` writes every thread's stack to stderr (the journal): a daemon that went
    # quiet says where each thread waits, even with its event loop stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    process.guard_memory()  # API keys in our environment stay out of reach of our commands
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    config_sha = _sha256(paths)
    store = Store(paths.db, check=True)  # quick_check before migrating: never build on a wreck
    if store.backend.shared:
        fresh = not store.backend.exists()
    else:
        fresh = not paths.db.exists() or paths.db.stat().st_size == 0
    try:
        await store.open()
    except BaseException:
        loop.remove_signal_handler(signal.SIGHUP)
        raise
    if fresh:  # never silently: a home that lost its database without a marker looks like this
        log.warning(
            "daemon.database_created",
            path=str(paths.db),
            note="a new, empty database; if this home had one, stop and restore it from a backup",
        )
    deps = build_deps(cfg, store, owner)
    deps.models.update(models)
    engine = Engine(deps)
    engine.drivers[BUILD_TRIGGER] = BuildDriver  # build runs: generate → judge → revise
    scheduler = Scheduler(deps, engine.launch, engine.live)
    api = ApiServer(paths, deps, scheduler.nudge)
    deps.on_change = api.on_change  # the scheduler looks now; web pages hear of it
    failures: list[str] = []  # what made the watchdog give up: the exit code becomes 1
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    listener: Listener | None = None
    keeping: asyncio.Task[None] | None = None
    leases_stop = asyncio.Event()  # after the engine stops: leases are kept while runs drain
    try:
        limited = [(a, act) for a, cfg_a in cfg.agents.items() for act in cfg_a.policy.max_per_hour]
        await store.write(lambda c: accounting.set_rate_limits(c, limited))
        deps.db_id = await store.write(meta.db_id)
        metering.start_tracing(deps)  # [tracing]: off unless configured
        await store.write(lambda c: meta.set_loaded_config(c, config_sha))
        deps.clock = clock or await clocks.home_clock(store, *scaled)
        outer = Outer(deps, engine.launch)  # its pace follows the clock
        api.on_poke = outer.wake
        reloading = asyncio.Lock()
        api.control.on_reload = lambda: reload_told(paths, deps, models, reloading, scheduler.nudge)
        keeper = LeaseKeeper(deps, engine, shared=store.backend.shared)
        metering.watch(deps, engine, keeper, lambda: listener)  # GET /metrics reads them
        resumed = await keeper.start()
        # Each daemon's own record of what it runs (the one in meta is the last to load's).
        await store.write(lambda c: leases.loaded_config(c, owner, config_sha))
        # Renewing and fencing from before the first run is driven until after the last one
        # stopped: a slow start or a long drain must not outlive the leases unwatched.
        keeping = asyncio.create_task(keeper.run(leases_stop), name="leases")
        keeping.add_done_callback(lambda t: _stop_if_failed(t, stop))
        for run_id, epoch in resumed:
            engine.launch(run_id, epoch)
        await scheduler.tick(force=True)
        if api.bind():  # the CLI pokes after each write: the database scan is a safety net
            scheduler.safety_scan_s = cfg.api.safety_scan_s
            outer.safety_scan_s = cfg.api.safety_scan_s
        await outer.start(plan=False)  # what fell due while down: recorded, caught up by policy
        # (new goals are planned after READY, in batches)
        if cfg.store.listen:  # other daemons' and remote CLIs' commits wake us at once
            listener = store.backend.listener(
                lambda: _soon(loop, scheduler.nudge, outer.wake), log, url=cfg.store.listen_url
            )
            if listener is not None:  # no change poll while it is up (SQLite has none)
                scheduler.listening = listener.connected.is_set
        counts = await store.read(q.count_runs)
        log.info(
            "daemon.ready",
            home=str(paths.home),
            resumed=len(resumed),
            waiting=counts.get("waiting", 0),
            startup_ms=round((time.monotonic() - started) * 1000, 1),
        )
        sdnotify.notify("READY=1\nSTATUS=serving")
        if ready is not None:
            ready()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(scheduler.run(stop), name="scheduler")
            tg.create_task(outer.run(stop), name="outer")
            tg.create_task(watchdog(deps, stop, failures), name="watchdog")
            tg.create_task(
                _reloader(paths, deps, models, hup, stop, reloading, scheduler.nudge), name="reload"
            )
            tg.create_task(retention(deps, stop), name="retention")
            tg.create_task(api.run(stop), name="api")
            tg.create_task(Sender(deps).run(stop), name="notify")  # the outbox: agentd/notify/
            tg.create_task(mail.follow_mail(deps, stop, scheduler.nudge), name="mail")  # IMAP IDLE
        log.info("daemon.stopping", in_flight=len(engine.tasks))
        sdnotify.notify("STOPPING=1")
        _ask_time_to_stop(store, cfg.daemon.shutdown_grace_s)
        await outer.stop(cfg.daemon.shutdown_grace_s)
        await engine.stop(cfg.daemon.shutdown_grace_s)
        leases_stop.set()
        (kept,) = await asyncio.gather(keeping, return_exceptions=True)
        if isinstance(kept, BaseException):  # logged by _stop_if_failed; still hand runs back
            failures.append(f"the lease keeper failed: {kept!r}")
        await keeper.stop()
    finally:
        if keeping is not None and not keeping.done():
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        api.close()
        if listener is not None:
            await asyncio.to_thread(listener.stop)
        await metering.stop_tracing(deps)
        closed = await store.close(_close_budget(store))
        if not closed or store.outage:
            failures.append(store.outage or "the database did not answer while stopping")
            log.critical(
                "daemon.stop_unfinished", database=store.backend.label,
                error=failures[-1], note="exiting with status 1 without the last writes: what "
                "was committed is intact, and the runs resume from their journals",
            )  # fmt: skip
    log.info("daemon.stopped", exit_code=1 if failures else 0)
    return 1 if failures else 0


def _ask_time_to_stop(store: Store, grace_s: float) -> None:
    """On a shared database, ask systemd for the stop's whole bound (EXTEND_TIMEOUT_USEC): the
    unit's TimeoutStopSec (30 s) is shorter than a stalled database's, and its SIGKILL would come
    before the stop could end with status 1 and daemon.stop_unfinished."""
    budget = _close_budget(store)
    if budget is not None:
        sdnotify.notify(f"EXTEND_TIMEOUT_USEC={int((2 * grace_s + budget + 10) * 1_000_000)}")


def _close_budget(store: Store) -> float | None:
    """How long the last writes may take at a stop: the writer's batch deadline twice and a
    reconnection (a stalled database then ends the stop with exit 1 instead of hanging it)."""
    deadline = store.backend.batch_deadline_s
    return None if deadline is None else 2 * deadline + 15.0


def _stop_if_failed(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """A lease keeper that died (a bug) must not leave the daemon driving runs unwatched."""
    if not task.cancelled() and task.exception() is not None:
        log.critical("lease.keeper_failed", error=repr(task.exception()))
        stop.set()


def _soon(loop: asyncio.AbstractEventLoop, *calls: Callable[[], None]) -> None:
    """From another thread (the listener's): run `calls` on the loop."""
    for call in calls:
        loop.call_soon_threadsafe(call)


def _sha256(paths: Paths) -> str:
    """The sha256 of the config file's bytes ("" if it cannot be read): `doctor` compares it."""
    try:
        return hashlib.sha256(paths.config.read_bytes()).hexdigest()
    except OSError:
        return ""


async def _reloader(
    paths: Paths,
    deps: Deps,
    models: dict[str, Model],
    hup: asyncio.Event,
    stop: asyncio.Event,
    reloading: asyncio.Lock,
    after: Callable[[], None],
) -> None:
    """On SIGHUP: load and validate the config; apply it, or log why not and keep the old one."""
    while True:
        waits = [asyncio.ensure_future(hup.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if stop.is_set():
            return
        hup.clear()
        await reload_told(paths, deps, models, reloading, after)


async def reload_told(
    paths: Paths,
    deps: Deps,
    models: dict[str, Model],
    reloading: asyncio.Lock,
    after: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """One reload at a time (a SIGHUP and `agentd reload` may cross), told to systemd; returns
    the verdict `agentd reload` prints (`{"applied", "error", "restart", "sha256", "pid"}`).
    `after` (the scheduler's nudge) applies its poll jobs now, not at its next paced look."""
    async with reloading:
        sdnotify.notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            verdict = await reload_verdict(paths, deps, models)
        finally:
            sdnotify.notify("READY=1\nSTATUS=serving")
            after()
    return {**verdict, "pid": os.getpid()}


async def reload(paths: Paths, deps: Deps, models: dict[str, Model]) -> bool:
    """`reload_verdict`, as whether it was applied."""
    return bool((await reload_verdict(paths, deps, models))["applied"])


def _refused(error: str, note: str) -> dict[str, Any]:
    log.error("config.reload_failed", error=error, note=note)
    return {"applied": False, "error": error, "note": note, "restart": [], "sha256": None}


async def reload_verdict(paths: Paths, deps: Deps, models: dict[str, Model]) -> dict[str, Any]:
    """Swap in the config file as it is now. Every run meets the new policy at its next check:
    the harness re-checks at execution against `deps.menu()`, rebuilt from `deps.config`.
    Unchanged models and sources keep their objects (clients, a file's read position). Returns
    whether it was applied, why not, and which changed settings wait for a restart."""
    sha = _sha256(paths)
    try:
        cfg = config.load(paths.config)
        fresh = build_deps(cfg, deps.store, deps.owner)
    except AgentdError as e:
        return _refused(str(e), "the config loaded before is kept")
    # An agent that still pursues goals cannot vanish by a reload: its runs would be abandoned
    # and its goals orphaned without anyone deciding so. Close or move those goals first.
    in_use = await deps.store.read(
        lambda c: sorted({g.agent for g in q.list_goals(c, status="active")} - set(cfg.agents))
    )
    if in_use:
        return _refused(
            f"agents {', '.join(in_use)} are gone from the config but have active goals",
            "the config loaded before is kept; close or pause those goals, or keep the agent",
        )
    old = deps.config
    keep_models = {n: m for n, m in deps.models.items() if old.models.get(n) == cfg.models.get(n)}
    keep_sources = {
        n: s for n, s in deps.sources.items() if old.sources.get(n) == cfg.sources.get(n)
    }
    fresh.models.update({n: m for n, m in keep_models.items() if n in fresh.models})
    fresh.models.update({n: m for n, m in models.items() if n in cfg.models})  # tests' clients
    fresh.sources.update({n: s for n, s in keep_sources.items() if n in fresh.sources})
    deps.config, deps.models = cfg, fresh.models
    deps.executors, deps.sources, deps.menus = fresh.executors, fresh.sources, {}
    limited = [(a, act) for a, cfg_a in cfg.agents.items() for act in cfg_a.policy.max_per_hour]
    try:
        await deps.store.write(lambda c: accounting.set_rate_limits(c, limited))
        await deps.store.write(lambda c: meta.set_loaded_config(c, sha))
        await deps.store.write(lambda c: leases.loaded_config(c, deps.owner, sha))
    except StateError as e:
        log.error("config.reload_unrecorded", error=str(e))
    restart = needs_restart(old, cfg)
    if restart:
        log.warning("config.needs_restart", settings=restart, note="they apply at the next start")
    deps.on_change()  # the scheduler looks at triggers and waits under the new config now
    log.info("config.reloaded", sha256=sha, agents=sorted(cfg.agents))
    return {"applied": True, "error": None, "note": None, "restart": restart, "sha256": sha}


def needs_restart(old: Config, new: Config) -> list[str]:
    """The changed settings a reload does not apply, as `[table] key`: all of [daemon] and [api]
    (the listeners, their bounds, the scan are set up at the start), and [web] when its pages
    need a port the daemon does not listen on yet (pages turned off stop being served at once), and
    the mail followers (an imap source some agent uses, added, removed or changed)."""
    changed = []
    for table in ("daemon", "api", "web"):
        was = getattr(old, table).model_dump(mode="json")
        now = getattr(new, table).model_dump(mode="json")
        changed += [
            f"[{table}] {k}" for k in sorted(was.keys() | now.keys()) if was.get(k) != now.get(k)
        ]
    listening = old.api.listen_port(old.web)
    wanted = new.api.listen_port(new.web)
    if wanted is None or wanted == listening:
        changed = [c for c in changed if not c.startswith("[web]")]
    return changed + mail.needs_restart(old, new)
