"""`agentd event send` and `agentd event list`: tell agentd something happened (an event starts or
wakes the runs that wait for it), with its name, dedupe key and data checked at the edge.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentd import config
from agentd.cli.paging import WithTotal, emit_page, stream_json
from agentd.cli.root import After, JsonFlag, Limit, Opt, app, emit, open_store, paths_of, sub_app
from agentd.errors import ConfigError, UsageError, require_utf8
from agentd.models import JSON
from agentd.operator import events as operator_events
from agentd.operator import home as operator_home
from agentd.operator import listing
from agentd.operator.parse import parse_object
from agentd.text import jsonable, screen
from agentd.views import records

event_app = sub_app(help="Events: tell agentd something happened (starts or wakes runs).")
app.add_typer(event_app, name="event")


# ── events ───────────────────────────────────────────────────────────────────────────────────
EVENT_NAME_MAX_CHARS = 100
EVENT_KEY_MAX_CHARS = 200
EVENT_DATA_MAX_BYTES = 65_536  # --data as UTF-8 JSON; it reaches the prompts of the runs it starts


def _event_text(option: str, value: str, max_chars: int) -> str:
    require_utf8(option, value)
    if not value.strip():
        raise UsageError(f"{option} is empty; e.g. agentd event send deploy --key deploy-1.4.2")
    if len(value) > max_chars:
        raise UsageError(f"{option} is {len(value):,} characters; at most {max_chars:,} fit")
    return value


def _event_fields(data: str | None) -> JSON:
    if data is None:
        return {}
    _event_text("--data", data, max_chars=EVENT_DATA_MAX_BYTES * 4)  # UTF-8 and not blank
    size = len(data.encode("utf-8"))
    if size > EVENT_DATA_MAX_BYTES:
        raise UsageError(
            f"--data is {size:,} bytes; an event carries at most {EVENT_DATA_MAX_BYTES:,} "
            "(64 KiB): send a reference (a path, a URL, an id) instead of the content"
        )
    return parse_object("--data", data)


@event_app.command("send")
def event_send(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The event name agents trigger or wait on.")
    ],
    data: Annotated[
        str | None, Opt(metavar="JSON", help="Fields (a JSON object, at most 64 KiB).")
    ] = None,
    key: Annotated[
        str | None,
        Opt(metavar="DEDUPE", help="Recorded once per key; a repeat prints the first one's id."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Record an event; prints its id. It starts a run for each active goal whose agent lists
    it in `triggers` (config.toml), and wakes runs waiting for it; a warning says when nothing
    does.

    \b
    Example:
      agentd event send deploy --data '{"service": "checkout"}' --key deploy-1.4.2
    """
    _event_text("NAME", name, EVENT_NAME_MAX_CHARS)
    if key is not None:
        _event_text("--key", key, EVENT_KEY_MAX_CHARS)
    fields = _event_fields(data)
    try:  # only for the warning below: an event is recorded whatever state the config is in
        cfg: config.Config | None = config.load(paths_of(ctx).config)
    except ConfigError:
        cfg = None

    with open_store(ctx) as store:
        event, duplicate, unheard = operator_events.send(store, cfg, name, fields, key)
    if duplicate:
        out = {**jsonable(event), "duplicate": True}
        emit(as_json, out, lambda: str(event.event_id))
        first = f"event {event.event_id} ({event.name})"
        typer.echo(screen(f"note: key {key!r} was already recorded as {first}"), err=True)
        return
    emit(as_json, event, lambda: str(event.event_id))
    if unheard:
        typer.echo(screen(f"warning: {unheard}"), err=True)


@event_app.command("list")
def event_list(
    ctx: typer.Context,
    limit: Limit = 50,
    after: After = None,
    with_total: WithTotal = False,
    as_json: JsonFlag = False,
) -> None:
    """List recent events, newest first (--after ID: the page before that event; --json
    --total: {events, total, next_after}; --json is written as it is read)."""
    if as_json:
        with open_store(ctx) as store:
            stream_json(listing.event_stream(store, after, limit), "events", with_total)
        return
    with open_store(ctx) as store:
        page = listing.events(store, after, limit)
        now = operator_home.now(store)  # the clock the events were stamped on
    events = page.rows
    emit_page(
        as_json, with_total, page, events, lambda: records.events_table(events, now), "events"
    )
