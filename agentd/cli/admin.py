"""The home and the daemon: `init`, `serve`, `demo`, `doctor`, `usage`, and `event send|list`."""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentd import config, daemon, doctor, log, render
from agentd.cli.root import JsonFlag, Limit, Opt, app, emit, open_store, paths_of, sub_app
from agentd.config import Paths, ScriptedModel
from agentd.db import accounting
from agentd.db import items as qi
from agentd.db.store import SyncStore
from agentd.errors import Refused, StateError, UsageError
from agentd.models import utcnow

event_app = sub_app(help="Events: tell agentd something happened (starts or wakes runs).")


def _template() -> str:
    resource = importlib.resources.files("agentd") / "config.example.toml"
    return resource.read_text() if resource.is_file() else render.FALLBACK_CONFIG


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read or change (0600), also when it already existed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)


def _write_home(paths: Paths) -> list[Path]:
    """Write config.toml, a placeholder replies file and a migrated database; returns what is new.

    Only the owner may read what agentd creates here (the database keeps observations, answers and
    raw model replies): a new home is 0700, its files 0600 (the store creates the database so).
    """
    try:
        paths.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_private(paths.config, _template())
    except OSError as e:
        raise StateError(f"{paths.home}: cannot create the home: {e.strerror or e}") from None
    created = [paths.config]
    for model in config.load(paths.config).models.values():
        if not isinstance(model, ScriptedModel) or model.replies.exists():
            continue
        if model.replies.parent == paths.home:
            _write_private(model.replies, render.PLACEHOLDER_REPLIES)
            created.append(model.replies)
    existed = paths.db.exists()
    SyncStore(paths.db).close()
    return created if existed else [*created, paths.db]


@app.command("init")
def init_cmd(
    ctx: typer.Context,
    force: Annotated[bool, Opt("--force", help="Overwrite an existing config.toml.")] = False,
) -> None:
    """Create a home: config.toml, a placeholder replies.json and the database.

    The database and an existing replies file are kept, even with --force.

    Example: agentd --home ~/agentd-try init
    """
    paths = paths_of(ctx)
    if paths.config.exists() and not force:
        raise Refused(f"{paths.config} already exists; keep it, or replace it with `init --force`")
    for path in _write_home(paths):
        typer.echo(render.screen(f"created {path}"))
    if paths.home.stat().st_mode & 0o077:  # an existing home: its mode is the operator's choice
        typer.echo(
            f"note: other users may open {paths.home}, which holds what the agents saw and were "
            f"told; `chmod 700 {paths.home}` makes it private",
            err=True,
        )
    prefix = "agentd" if paths.home == config.default_home() else f"agentd --home {paths.home}"
    typer.echo(f"next: edit {paths.config}, check it with `{prefix} doctor`, then `{prefix} serve`")


MAX_CLOCK_SPEED = 1_000_000.0


def check_speed(speed: float | None) -> float | None:
    if speed is not None and not 1 <= speed <= MAX_CLOCK_SPEED:
        raise UsageError(
            f"--clock-speed {speed:g}: give a factor from 1 to {MAX_CLOCK_SPEED:g}, "
            "e.g. --clock-speed 3600 (one simulated hour per second)"
        )
    return speed


@app.command("serve")
def serve_cmd(
    ctx: typer.Context,
    clock_speed: Annotated[
        float | None,
        Opt(
            "--clock-speed",
            metavar="N",
            help="TESTING ONLY: run the daemon's clock N times faster than the wall, starting "
            "now (3600: one simulated hour per second). Check-ins, timers, expiries and backoff "
            "all follow it, so days of check-ins pass in minutes.",
        ),
    ] = None,
) -> None:
    """Run the daemon in the foreground until SIGTERM or Ctrl-C.

    \b
    Example (a systemd unit runs the same):
      agentd --home /var/lib/agentd serve
    Watch a week of check-ins in under three minutes (a throw-away home, never production):
      agentd --home /tmp/try serve --clock-speed 3600
    """
    paths = paths_of(ctx)
    cfg = config.load(paths.config)
    speed = check_speed(clock_speed)
    log.configure(cfg.daemon.log_level)
    raise typer.Exit(asyncio.run(daemon.serve(paths, cfg, clock_speed=speed)))


# ── demo: agentd/demo.py provides main(home, yes, recover) -> exit code ──────────────────────
@app.command("demo")
def demo_cmd(
    yes: Annotated[bool, Opt("--yes", help="Approve through the inbox automatically.")] = False,
    recover: Annotated[
        bool, Opt("--recover", help="The service heals while the approval waits: it is withdrawn.")
    ] = False,
    home: Annotated[Path | None, Opt(metavar="PATH", help="Use this home, not a temp dir.")] = None,
) -> None:
    """Watch a background agent keep a real service healthy, in a throw-away home.

    A demo checkout service gets a bad deploy; the agent notices, investigates, and asks you to
    approve a rollback. Example: agentd demo --yes   (or: agentd demo --recover)
    """
    try:
        demo = importlib.import_module("agentd.demo")  # lazily: the demo is optional
    except ModuleNotFoundError as e:
        if e.name != "agentd.demo":
            raise
        raise StateError("the demo is not part of this build") from None
    raise typer.Exit(int(demo.main(home, yes, recover)))


@app.command("usage")
def usage_cmd(
    ctx: typer.Context,
    days: Annotated[int, Opt(min=1, help="How many UTC days back, today included.")] = 30,
    as_json: JsonFlag = False,
) -> None:
    """Model calls, tokens and cost by goal, model and day.

    Costs come from [prices] in config.toml. Example: agentd usage --days 7 --json
    """
    since = time.time() - days * 86400
    with open_store(ctx) as store:
        rows = store.read(lambda c: accounting.usage(c, since))
    emit(as_json, rows, lambda: render.usage_table(rows))


# ── events ───────────────────────────────────────────────────────────────────────────────────
@event_app.command("send")
def event_send(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The event name agents trigger or wait on.")
    ],
    data: Annotated[str | None, Opt(metavar="JSON", help="Fields (a JSON object).")] = None,
    key: Annotated[str | None, Opt(metavar="DEDUPE", help="Recorded once per key.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record an event; prints its id.

    \b
    Example:
      agentd event send deploy --data '{"service": "checkout"}' --key deploy-1.4.2
    """
    fields = render.parse_object("--data", data) if data is not None else {}

    def work(c: Any) -> Any:
        event_id = qi.add_event(c, name, fields, key, source="cli")
        return None if event_id is None else qi.events_after(c, event_id - 1, 1)[0]

    with open_store(ctx) as store:
        event = store.write(work)
    if event is None:
        if as_json:
            typer.echo(render.to_json({"event_id": None, "duplicate": True, "dedupe_key": key}))
        typer.echo("duplicate key, ignored", err=True)
        return
    emit(as_json, event, lambda: str(event.event_id))


@event_app.command("list")
def event_list(ctx: typer.Context, limit: Limit = 50, as_json: JsonFlag = False) -> None:
    """List recent events, newest first."""
    with open_store(ctx) as store:
        events = store.read(lambda c: qi.list_events(c, limit))
    emit(as_json, events, lambda: render.events_table(events, utcnow()))


# ── doctor ───────────────────────────────────────────────────────────────────────────────────
@app.command("doctor")
def doctor_cmd(
    ctx: typer.Context,
    ping: Annotated[bool, Opt("--ping", help="Also ask each model for a tiny reply.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check the home: config, database, daemon, models and their API keys (never printed).

    Exits 0 when every required check passes; a stopped daemon is only reported.
    Example: agentd doctor --ping
    """
    paths = paths_of(ctx)
    report = doctor.examine(paths, daemon.daemon_pid(paths))
    if ping and report.ok:
        pings = asyncio.run(doctor.ping(config.load(paths.config)))
        report = doctor.Report(report.home, report.checks + pings)
    emit(as_json, report.as_json(), lambda: render.checks_text(report.checks))
    raise typer.Exit(0 if report.ok else 1)
