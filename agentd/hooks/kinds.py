"""A verified delivery's body as the events it records, pure, one function per kind:
Alertmanager's webhook payload (version 4) is one event per alert, GitHub's one per delivery,
any JSON one per delivery. Each event has a dedupe key under `hook:NAME:` (a repeated
notification or a redelivery records nothing twice). What is malformed raises Malformed, whose
message names the problem (answered 400)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentd.config.hooks import HookConfig
from agentd.models import JSON

# Alerts recorded of one Alertmanager notification; the rest are left out, not refused (a 4xx
# would make Alertmanager send the whole group again and again: its max_alerts is 0, all, unless
# set — the snippet sets it to this).
MAX_ALERTS = 500
_EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
_FIELD_CHARS = 2000  # a label or annotation value kept (the prompt caps again)
MAX_DEPTH = 32  # nesting of a body's objects and arrays (a sender's data, stored and quoted)


class Malformed(Exception):
    """The body is not what the hook's kind sends (answered 400 with this message)."""


@dataclass(frozen=True)
class Incoming:
    name: str
    data: JSON
    key: str | None


def parse_json(body: bytes) -> Any:
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise Malformed("the body is not UTF-8 JSON") from None
    except ValueError as e:
        raise Malformed(f"the body is not JSON: {e}") from None
    except RecursionError:  # `[[[[…` a megabyte deep: the parser's stack, not a 500
        raise Malformed(f"the body nests deeper than {MAX_DEPTH} levels") from None
    if _depth(value) > MAX_DEPTH:
        raise Malformed(f"the body nests deeper than {MAX_DEPTH} levels")
    return value


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (Python reads them; PostgreSQL's jsonb refuses them, and
    the sender would be told to send again forever)."""
    raise Malformed(f"the body is not JSON: {name} is not a JSON value")


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in `value` (iterative: no recursion to exhaust)."""
    deepest, todo = 0, [(value, 1)]
    while todo and deepest <= MAX_DEPTH:
        item, level = todo.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo.extend((c, level + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise Malformed(f"{where} is an object of strings")
    return {str(k)[:200]: v[:_FIELD_CHARS] for k, v in value.items()}


def _text(alert: dict[str, Any], key: str, where: str) -> str:
    value = alert.get(key, "")
    if not isinstance(value, str):
        raise Malformed(f"{where}.{key} is a string")
    return value[:_FIELD_CHARS]


def alertmanager(name: str, hook: HookConfig, body: bytes) -> tuple[list[Incoming], int]:
    """The events of the first MAX_ALERTS alerts, and how many alerts were left out."""
    payload = parse_json(body)
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise Malformed('not an Alertmanager notification: no "alerts" list')
    if str(payload.get("version", "4")) != "4":
        raise Malformed(
            f"Alertmanager payload version {str(payload.get('version'))[:20]!r}; 4 is read"
        )
    alerts = payload["alerts"][:MAX_ALERTS]
    left_out = len(payload["alerts"]) - len(alerts)
    events = []
    for i, alert in enumerate(alerts):
        where = f"alerts[{i}]"
        if not isinstance(alert, dict):
            raise Malformed(f"{where} is not an object")
        status = _text(alert, "status", where)
        if status not in ("firing", "resolved"):
            raise Malformed(f"{where}.status is {status[:20]!r}: firing or resolved")
        labels = _strings(alert.get("labels"), f"{where}.labels")
        fingerprint = _text(alert, "fingerprint", where) or _fingerprint(labels)
        starts = _text(alert, "startsAt", where)
        event = hook.firing_event if status == "firing" else hook.resolved_event
        data: JSON = {
            "status": status,
            "alertname": labels.get("alertname", ""),
            "fingerprint": fingerprint,
            "labels": labels,
            "annotations": _strings(alert.get("annotations"), f"{where}.annotations"),
            "startsAt": starts,
            "endsAt": _text(alert, "endsAt", where),
            "generatorURL": _text(alert, "generatorURL", where),
        }
        key = f"hook:{name}:{fingerprint}:{starts}:{status}"
        events.append(Incoming(event or f"{name}.{status}", data, key))
    return events, left_out


def _fingerprint(labels: dict[str, str]) -> str:
    """A stand-in for a sender that leaves `fingerprint` out: the sorted labels, hashed."""
    import hashlib

    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def github(
    name: str, kind: str, delivery: str, body: bytes, *, form: bool = False
) -> list[Incoming]:
    """`form`: the webhook's content type is application/x-www-form-urlencoded, the JSON in
    its `payload` field (GitHub signs the body as sent)."""
    if not re.fullmatch(r"[a-z_]{1,60}", kind):
        raise Malformed("no X-GitHub-Event header naming the event (e.g. push, issues)")
    payload = parse_json(_form_payload(body) if form else body)
    if not isinstance(payload, dict):
        raise Malformed('the body is not a JSON object: set the webhook\'s "Content type" to '
                        "application/json")  # fmt: skip
    repo = payload.get("repository")
    sender = payload.get("sender")
    data: JSON = {
        "event": kind,
        "delivery": delivery,
        "action": payload.get("action") if isinstance(payload.get("action"), str) else None,
        "repository": repo.get("full_name") if isinstance(repo, dict) else None,
        "sender": sender.get("login") if isinstance(sender, dict) else None,
        "payload": payload,
    }
    return [Incoming(f"{name}.{kind}", data, f"hook:{name}:{delivery}")]


def json_event(name: str, hook: HookConfig, message_id: str | None, body: bytes) -> list[Incoming]:
    payload = parse_json(body)
    data: JSON = payload if isinstance(payload, dict) else {"payload": payload}
    event = hook.event or name
    if hook.event_field is not None:
        given = data.get(hook.event_field)
        if not isinstance(given, str) or not _EVENT_NAME.fullmatch(given):
            raise Malformed(f"the body's {hook.event_field!r} field is not an event name "
                            "(a string of letters, digits, _.:-)")  # fmt: skip
        event = given
    key = f"hook:{name}:{message_id}" if message_id else None
    return [Incoming(event, data, key)]


def _form_payload(body: bytes) -> bytes:
    """The `payload` field of a form-encoded GitHub delivery."""
    from urllib.parse import parse_qsl

    try:
        fields = parse_qsl(body.decode("ascii"), strict_parsing=True, max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        raise Malformed(
            "the form-encoded body is not a GitHub delivery (one payload field)"
        ) from None
    found = [v for k, v in fields if k == "payload"]
    if len(found) != 1:
        raise Malformed("the form-encoded body has no payload field (GitHub puts the JSON there)")
    return found[0].encode()
