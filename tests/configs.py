"""Config text and model replies the end-to-end tests share: the TOML of a home whose model is
scripted (its replies read from replies.json), the tables that turn the web pages on, a command
action that appends to a file, and the builders of the replies. Plain builders, no fixtures
(those are in tests/conftest.py): each returns text for `Home.write_config` or a reply for its
replies list."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.conftest import closed_port


def scripted_home(
    actions: Sequence[str],
    *,
    rules: str | None = None,
    policy: str | None = None,
    tables: str = "",
    agent_keys: str = "",
    agent_tables: str = "",
    request_log: str | None = None,
) -> str:
    """A home whose daemon polls every 20 ms and whose one model (`default`) is scripted, its
    replies read from replies.json; the agent `default` may choose `actions`.

    `rules` is the inside of the policy's `rules` inline table (`'append = "approve"'`, or "" for
    an empty one) and `policy` more keys of the policy's inline table (`"max_per_hour = { … }"`);
    with neither the agent has no `policy` key. `tables` stand before `[agents.default]` (the
    actions it names, `[api]`, `[web]`), `agent_keys` are more lines of `[agents.default]`,
    `agent_tables` stand after it (its sub-tables: `[agents.default.limits]` …), and
    `request_log` names the file the model logs each request to."""
    log = f'request_log = "{request_log}"\n' if request_log is not None else ""
    parts = [] if rules is None else [f"rules = {{ {rules} }}"]
    parts += [] if policy is None else [policy]
    policy_line = f"policy = {{ {', '.join(parts)} }}\n" if parts else ""
    keys = f"{agent_keys}\n" if agent_keys else ""
    return (
        "[daemon]\npoll_interval_s = 0.02\n\n"
        f'[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n{log}\n'
        f"{tables}"
        f"[agents.default]\n{keys}actions = {json.dumps(list(actions))}\n{policy_line}"
        f"{agent_tables}"
    )


def web_on(port: int, api_keys: str = "") -> str:
    """The tables that turn the web pages on (`[web] enabled`) with the API on `port` (and the
    `[api]` lines `api_keys` besides)."""
    api = f"{api_keys}\n" if api_keys else ""
    return f"[api]\n{api}port = {port}\n\n[web]\nenabled = true\n\n"


def with_web(text: str, api_keys: str = "") -> str:
    """The home of `text` with the web pages on, on a port of their own (one nothing listens on:
    a test never takes 8765); the tests send their requests over the unix socket, where the
    pages are served as on the port."""
    return f"{text}\n{web_on(closed_port(), api_keys)}"


def append_action(
    out: Path, *, keyed: bool = True, pattern: str = "^[a-z]+$", idempotent: bool | None = None
) -> str:
    """The table of a command action `append` that appends its one argument `word` (matching
    `pattern`) as a line to the file `out` — after the run's idempotency key when `keyed`, so a
    test can tell which step ran it; `idempotent` is written only when given."""
    echo = '"$AGENTD_IDEMPOTENCY_KEY {word}"' if keyed else "{word}"
    argv = json.dumps(["sh", "-c", f"echo {echo} >> {out}"])
    flag = "" if idempotent is None else f"idempotent = {str(idempotent).lower()}\n"
    return (
        f'[actions.append]\ntype = "command"\nargv = {argv}\n'
        f"params = {{ word = {{ pattern = {json.dumps(pattern)} }} }}\n{flag}\n"
    )


def act(kind: str, reason: str | None = None, **args: Any) -> dict[str, Any]:
    """A scripted reply in which the model proposes the action `kind` with `args`, saying
    `reason` (by default "do <kind>")."""
    return {"reason": reason or f"do {kind}", "action": {"kind": kind, **args}}


# The model finishes the run, succeeded.
FINISH = act("finish", "done", outcome="succeeded", summary="ok")
