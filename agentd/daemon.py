"""The daemon's lifecycle: lock the home, migrate, recover, run the root tasks, stop cleanly.

`serve` holds an exclusive lock on the home (a second daemon exits at once), resumes every run that
was executing, lets the scheduler re-match waits (answers committed while down apply now), records
the check-ins that fell due while it was down (agentd/outer/service.py), tells systemd READY, and on
SIGTERM/SIGINT takes no new step and lets steps in flight reach their journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import structlog

from agentd import actions, config, llm, process, sdnotify, sources
from agentd.clock import Clock, SystemClock
from agentd.config import Config, Paths
from agentd.db import accounting, meta
from agentd.db import queries as q
from agentd.db.store import Store
from agentd.deps import LEASE_S, Deps
from agentd.engine import Engine
from agentd.errors import DaemonRunning, StateError
from agentd.llm import Model
from agentd.outer import timebase
from agentd.outer.service import Outer
from agentd.scheduler import Scheduler

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
            raise StateError(f"{paths.lock}: cannot write the pid file: {e.strerror}") from None
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
        ex = actions.build(name, cfg.action(name), env)
        if ex is not None:
            executors[name] = ex
    return Deps(
        config=cfg,
        store=store,
        models={name: llm.build(name, m) for name, m in cfg.models.items()},
        executors=executors,
        sources={name: sources.build(name, cfg.sources[name], env) for name in used_sources},
        owner=owner,
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
) -> int:
    """Run until SIGTERM/SIGINT (or `stop` is set); returns the exit code.

    `ready` (a callable) is told when recovery is done — what systemd hears as READY=1.
    `models` replaces providers built from the config (tests hand in SDK clients on a mock
    transport: the narrowest seam, everything else real). `clock` replaces the wall clock
    (tests); `clock_speed` runs the home's recorded simulated clock N× faster than the wall
    (`serve --clock-speed N`, a testing option: see agentd/outer/timebase.py).
    """
    with home_lock(paths):
        return await _serve_locked(
            paths, cfg, ready, stop or asyncio.Event(), models or {}, clock, clock_speed
        )


async def _serve_locked(
    paths: Paths,
    cfg: Config,
    ready: Any,
    stop: asyncio.Event,
    models: dict[str, Model],
    clock: Clock | None,
    clock_speed: float | None,
) -> int:
    started = time.monotonic()
    process.guard_memory()  # API keys in our environment stay out of reach of our commands
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    store = Store(paths.db)
    await store.open()
    deps = build_deps(cfg, store, owner)
    deps.models.update(models)
    engine = Engine(deps)
    scheduler = Scheduler(deps, engine.launch, engine.live)
    deps.on_change = scheduler.nudge
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        limited = [(a, act) for a, cfg_a in cfg.agents.items() for act in cfg_a.policy.max_per_hour]
        await store.write(lambda c: accounting.set_rate_limits(c, limited))
        deps.db_id = await store.write(meta.db_id)
        deps.clock = clock or await _home_clock(store, clock_speed)
        outer = Outer(deps, engine.launch)  # its pace follows the clock
        resumed = await store.write(lambda c: q.claim_running(c, owner, LEASE_S))
        for run_id, epoch in resumed:
            engine.launch(run_id, epoch)
        await scheduler.tick(force=True)
        await outer.start()  # check-ins missed while down: recorded, caught up by policy
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
            tg.create_task(_watchdog(deps, stop), name="watchdog")
            tg.create_task(_retention(deps, stop), name="retention")
        log.info("daemon.stopping", in_flight=len(engine.tasks))
        sdnotify.notify("STOPPING=1")
        await outer.stop(cfg.daemon.shutdown_grace_s)
        await engine.stop(cfg.daemon.shutdown_grace_s)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await store.close()
    log.info("daemon.stopped")
    return 0


async def _home_clock(store: Store, speed: float | None) -> Clock:
    """The wall, or the home's simulated clock at `speed` (continued from its last run)."""
    wall = time.time()
    if speed is not None:
        clock = await store.write(lambda c: timebase.scaled(c, speed, wall))
        log.warning("daemon.clock_scaled", speed=speed, now=clock.now(), note="testing only")
        return clock
    reached = await store.write(lambda c: timebase.to_wall(c, wall))
    if reached is not None and reached > wall:
        log.warning(
            "daemon.clock_reset",
            note="this home ran on a simulated clock; times it recorded may lie in the future",
            ahead_s=round(reached - wall),
        )
    return SystemClock()


async def _watchdog(deps: Deps, stop: asyncio.Event) -> None:
    """Prove the loop and the database are alive: a real read each period, then WATCHDOG=1."""
    interval = config.watchdog_interval_s() or deps.config.daemon.watchdog_interval_s
    while not stop.is_set():
        try:
            async with asyncio.timeout(interval):
                await deps.store.read(lambda c: c.execute("SELECT 1").fetchone())
        except (TimeoutError, StateError) as e:
            log.error("daemon.unhealthy", error=str(e) or "database read timed out")
        else:
            sdnotify.notify("WATCHDOG=1")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


async def _retention(deps: Deps, stop: asyncio.Event) -> None:
    """Apply `journal_retention_days` once an hour: finished runs' steps, old snapshots."""
    keep_s = deps.config.daemon.journal_retention_days * 86400
    while not stop.is_set():
        try:
            pruned = await deps.store.write(lambda c: meta.prune(c, time.time() - keep_s))
        except StateError as e:  # a lock held too long: prune at the next hour
            log.error("journal.prune_failed", error=str(e))
            pruned = 0
        if pruned:
            log.info("journal.pruned", rows=pruned)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 3600)
