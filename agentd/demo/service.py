"""A small real "checkout" service for the demo: HTTP health, a request log, deploy and rollback.

    python -m agentd.demo.service serve --state DIR --port N   # the service itself
    python -m agentd.demo.service deploy --state DIR VERSION   # switch version (…-bad versions fail)
    python -m agentd.demo.service rollback --state DIR         # back to the previous version
    python -m agentd.demo.service verify-rollback --state DIR  # done / not-done: did the key's rollback run?
    python -m agentd.demo.service version --state DIR          # the deployed version, and the one before
    python -m agentd.demo.service restart --state DIR          # restart (does not fix a bad version)
    python -m agentd.demo.service heal --state DIR             # the broken backend recovers by itself

Every deploy and rollback is appended to DIR/deploys.log: the service's own record of what happened.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _state(d: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((d / "state.json").read_text()))
    except FileNotFoundError:
        return {"version": "v1", "previous": None}


def _write_state(d: Path, state: dict[str, Any]) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.replace(d / "state.json")


def _record(d: Path, line: str) -> None:
    with (d / "deploys.log").open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}\n")
        f.flush()
        os.fsync(f.fileno())


def _log(d: Path, line: str) -> None:
    with (d / "service.log").open("a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}\n")


def deploy(d: Path, version: str) -> None:
    state = _state(d)
    _write_state(d, {"version": version, "previous": state["version"], "deployed_at": _now()})
    _record(d, f"deploy {version} (was {state['version']})")
    _log(d, f"INFO deployed {version}")


def rollback(d: Path) -> int:
    state = _state(d)
    if not state.get("previous"):
        print("nothing to roll back to", file=sys.stderr)
        return 1
    key = os.environ.get("AGENTD_IDEMPOTENCY_KEY", "-")
    # The switch and the key that caused it land in one atomic state write, so verify-rollback
    # can never see one without the other; deploys.log is the human-readable record after it.
    keys = [*state.get("rollback_keys", []), key]
    _write_state(
        d,
        {"version": state["previous"], "previous": state["version"], "deployed_at": _now(),
         "rollback_keys": keys},
    )  # fmt: skip
    _record(d, f"rollback {state['version']} -> {state['previous']} key={key}")
    _log(d, f"INFO rolled back to {state['previous']}")
    print(f"rolled back {state['version']} -> {state['previous']}")
    return 0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def version(d: Path) -> int:
    state = _state(d)
    print(
        f"version={state['version']} previous={state.get('previous')} "
        f"deployed_at={state.get('deployed_at', '?')}"
    )
    return 0


def restart(d: Path) -> int:
    _log(d, f"INFO restarted (version {_state(d)['version']})")
    print("restarted")
    return 0


def heal(d: Path) -> int:
    _write_state(d, {**_state(d), "healed": True})
    _log(d, "INFO payment backend reachable again")
    return 0


def verify_rollback(d: Path) -> int:
    """Print `done` if the rollback keyed $AGENTD_IDEMPOTENCY_KEY happened, `not-done` if it did
    not, and exit 0; a crash here (any other exit or output) leaves agentd's answer unknown."""
    key = os.environ.get("AGENTD_IDEMPOTENCY_KEY")
    if not key:
        print("AGENTD_IDEMPOTENCY_KEY is not set", file=sys.stderr)
        return 2
    print("done" if key in _state(d).get("rollback_keys", []) else "not-done")
    return 0


def serve(d: Path, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state = _state(d)
            version = state["version"]
            bad = version.endswith("-bad") and not state.get("healed")
            if self.path.startswith("/health"):
                code = 500 if bad else 200
                body = {"status": "failing" if bad else "ok", "version": version}
            elif self.path.startswith("/checkout"):
                code = 502 if bad else 200
                body = {"ok": not bad, "version": version}
            else:
                code, body = 404, {"error": "not found"}
            if bad:
                _log(d, f"ERROR {self.path} -> {code}: payment backend timeout (version {version})")
            else:
                _log(d, f"INFO {self.path} -> {code}")
            payload = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    tmp = d / "port.tmp"  # written then renamed: a reader never sees an empty port file
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(d / "port")
    _log(d, f"INFO checkout service listening on 127.0.0.1:{server.server_address[1]}")
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agentd.demo.service", description=__doc__)
    p.add_argument(
        "command",
        choices=["serve", "deploy", "rollback", "verify-rollback", "version", "restart", "heal"],
    )
    p.add_argument("version", nargs="?")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--port", type=int, default=0)
    a = p.parse_intermixed_args(argv)
    a.state.mkdir(parents=True, exist_ok=True)
    if a.command == "serve":
        serve(a.state, a.port)
    elif a.command == "deploy":
        if not a.version:
            p.error("deploy needs a VERSION")
        deploy(a.state, a.version)
    else:
        simple = {"rollback": rollback, "verify-rollback": verify_rollback, "version": version,
                  "restart": restart, "heal": heal}  # fmt: skip
        return simple[a.command](a.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
