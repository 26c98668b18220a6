"""Running the daemon as a command line handles it: `serve` in the foreground or detached (its
pid in the home's agentd.lock, its log in agentd.log), and `agentd stop`. The daemon itself is
imported only by the foreground `serve`; `stop` and `serve --detach` only signal and wait.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from agentd import config, log
from agentd.cli.admin import check_speed, check_start
from agentd.cli.root import Opt, app, daemon_pid, paths_of
from agentd.config import Paths
from agentd.errors import AgentdError, StateError, UsageError
from agentd.text import screen

LOG_FORMATS = ("console", "json")
START_TIMEOUT_S = 60.0  # `serve --detach` waits this long for the daemon to hold the home's lock
STOP_TIMEOUT_S = 60.0  # `agentd stop` waits this long for the daemon to finish by default
POLL_S = 0.05


def check_log_format(fmt: str | None) -> str | None:
    if fmt is not None and fmt not in LOG_FORMATS:
        raise UsageError(f"--log-format {fmt!r} is neither console nor json; pick one of them")
    return fmt


def foreground(
    paths: Paths, speed: float | None, start: float | None, log_format: str | None
) -> int:
    """Run the daemon here until SIGTERM or Ctrl-C; its exit code."""
    cfg = config.load(paths.config)  # a ConfigError exits 2: systemd does not restart it
    from agentd.daemon import serve as daemon  # the whole daemon, once the config is good

    log.configure(cfg.daemon.log_level, fmt=log_format)
    return asyncio.run(daemon.serve(paths, cfg, clock_speed=speed, clock_start=start))


def said_on_stderr(e: AgentdError) -> None:
    """An expected error of `serve`; under systemd with its priority too (each line is an entry
    of its own), so `journalctl -p err` shows it."""
    lines = screen(f"agentd: {e}").splitlines()
    typer.echo("\n".join(f"<{log.PRIORITY['error']}>{ln}" for ln in lines), err=True)


def detached(paths: Paths, argv: list[str]) -> int:
    """Start `agentd serve ARGV…` in a session of its own, its output appended to agentd.log;
    return once it holds the home (its pid in agentd.lock) — or say why it stopped."""
    config.load(paths.config)  # a bad config is said here, not only in the log
    if (pid := daemon_pid(paths)) is not None:
        raise StateError(
            f"a daemon (pid {pid}) already serves {paths.home}; `agentd stop` stops it"
        )
    logfile = paths.home / "agentd.log"
    env = {**os.environ, "AGENTD_LOG_FORMAT": os.environ.get("AGENTD_LOG_FORMAT") or "json"}
    command = [sys.executable, "-m", "agentd", "--home", str(paths.home), "serve", *argv]
    with logfile.open("ab") as out:
        start = out.tell()  # what this start logs comes after
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
            start_new_session=True,  # no SIGHUP when the terminal closes; not in its job control
        )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    # Serving is its ready line, not only its lock: a daemon takes the lock first and may still
    # give up after it (a corrupt database), which must not read as started.
    while (said := _since(logfile, start)).find(READY) < 0 or daemon_pid(paths) != child.pid:
        if child.poll() is not None:
            tail = said.strip().splitlines()[-3:]
            raise StateError(
                f"the daemon exited {child.returncode} at start; {logfile} ends:\n"
                + "\n".join(tail)
            )
        if time.monotonic() > deadline:
            raise StateError(f"the daemon (pid {child.pid}) did not start in time; see {logfile}")
        time.sleep(POLL_S)
    for line in _troubles(said):  # e.g. its [api] port taken: it serves, but not all of it
        typer.echo(screen(f"agentd: the daemon logged at start: {line}"), err=True)
    typer.echo(
        f"agentd: the daemon (pid {child.pid}) serves {paths.home}; its log: {logfile}; "
        "`agentd stop` stops it"
    )
    return 0


READY = "daemon.ready"  # the event a daemon logs once it serves (JSON and console lines alike)


def _since(logfile: Path, offset: int) -> str:
    with logfile.open("rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def _troubles(said: str) -> list[str]:
    """The warnings and errors among JSON log lines, as `event: detail` (console lines: none)."""
    out = []
    for line in said.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("warning", "error", "critical"):
            rest = {k: v for k, v in entry.items() if k not in ("event", "level", "timestamp")}
            out.append(f"{entry.get('event')}: " + ", ".join(f"{k}={v}" for k, v in rest.items()))
    return out


@app.command("serve")
def serve_cmd(
    ctx: typer.Context,
    clock_speed: Annotated[
        float | None,
        Opt(
            "--clock-speed",
            metavar="N",
            help="TESTING ONLY: run the home's clock N times faster than the wall, from where "
            "it was (3600: one simulated hour per second). Check-ins, timers, wait timeouts, "
            "expiries, backoff, budgets' days, rate limits' hours and every time the daemon and "
            "the CLI write or show follow it. Not scaled (wall seconds): source polls "
            "([agents.*.watch] interval_s), the daemon's poll_interval_s, every I/O timeout_s "
            "(models, actions, sources, notify), run leases and log timestamps.",
        ),
    ] = None,
    clock_start: Annotated[
        str | None,
        Opt(
            "--clock-start",
            metavar="ISO",
            help="TESTING ONLY, with --clock-speed: the simulated clock starts at this instant "
            "(ISO 8601, UTC unless it says otherwise), e.g. 2030-01-01T09:00:00Z. Given at "
            "every start, it sets the clock again (rows written since may lie in its future).",
        ),
    ] = None,
    detach: Annotated[
        bool,
        Opt(
            "--detach",
            help="Run in the background, logging to agentd.log in the home (JSON); "
            "return once it serves. Its pid is in agentd.lock; `agentd stop` stops it.",
        ),
    ] = False,
    log_format: Annotated[
        str | None,
        Opt(
            "--log-format",
            metavar="console|json",
            help="Log lines on stderr: console (readable) "
            "or json [default: console on a terminal, else json; $AGENTD_LOG_FORMAT].",
        ),
    ] = None,
) -> None:
    """Run the daemon in the foreground until SIGTERM or Ctrl-C (or in the background: --detach).

    \b
    Example (a systemd unit runs the same):
      agentd --home /var/lib/agentd serve
    In the background, then stopped:
      agentd serve --detach && agentd stop
    Watch a week of check-ins in under three minutes (a throw-away home, never production):
      agentd --home /tmp/try serve --clock-speed 3600
    The same week from a chosen Monday (tests, demos):
      agentd --home /tmp/try serve --clock-speed 3600 --clock-start 2030-01-07T09:00:00Z
    """
    paths = paths_of(ctx)
    try:
        speed, start = check_speed(clock_speed), check_start(clock_start, check_speed(clock_speed))
        fmt = check_log_format(log_format)
        if detach:
            more = [*(["--clock-speed", str(clock_speed)] if clock_speed else []),
                    *(["--clock-start", clock_start] if clock_start else [])]  # fmt: skip
            raise typer.Exit(detached(paths, more))
        code = foreground(paths, speed, start, fmt)
    except AgentdError as e:
        if not log.to_journal(sys.stderr):
            raise
        said_on_stderr(e)
        raise typer.Exit(e.exit_code) from None
    raise typer.Exit(code)


@app.command("stop")
def stop_cmd(
    ctx: typer.Context,
    timeout: Annotated[
        float,
        Opt(
            "--timeout",
            metavar="SECONDS",
            min=0,
            help="Wait this long for the daemon to finish its steps in flight [default: 60].",
        ),
    ] = STOP_TIMEOUT_S,
) -> None:
    """Stop the daemon serving this home and wait until it is gone.

    It gets SIGTERM, as from systemd: the steps in flight reach the journal, runs are handed
    over, and it exits. Nothing serving the home is no error (exit 0), as for `systemctl stop`.

    \b
    Example:
      agentd stop
    """
    paths = paths_of(ctx)
    pid = daemon_pid(paths)
    if pid is None:
        typer.echo(f"agentd: no daemon serves {paths.home}")
        return
    if pid <= 0:
        raise StateError(
            f"a daemon holds {paths.home} but {paths.lock} names no pid; stop it where it was "
            "started (systemctl stop agentd)"
        )
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it exited meanwhile
    except PermissionError:
        raise StateError(
            f"the daemon (pid {pid}) is another user's; stop it as that user"
        ) from None
    deadline = time.monotonic() + timeout
    while daemon_pid(paths) is not None:
        if time.monotonic() > deadline:
            raise StateError(
                f"the daemon (pid {pid}) is still finishing after {timeout:g} s; "
                f"`agentd stop` again waits more, `kill -KILL {pid}` forces it (its steps in "
                "flight are resolved at the next start)"
            )
        time.sleep(POLL_S)
    typer.echo(f"agentd: stopped the daemon (pid {pid})")
