"""A tiny goal-context MCP server: a job-search app that knows your saved roles and applications.

It shows the two-way flow with agentd: agentd *reads* where you stand from the app (resources and
a read-only tool, through an `mcp` source) and *acts* in it (an `mcp_tool` action calling
`apply_to_role`, under agentd's policy and approvals). The app owns its memory: one JSON file,
given by `--data PATH` or `$JOBSEARCH_DATA`, seeded with three saved roles on first use.

    python examples/jobsearch_mcp.py --data jobs.json      # stdio: what agentd starts
    JOBSEARCH_TOKEN=s3cret python examples/jobsearch_mcp.py --data jobs.json --http 8765
                                       # streamable HTTP on http://127.0.0.1:8765/mcp, and with
                                       # $JOBSEARCH_TOKEN set only for `Authorization: Bearer …`

`apply_to_role` records an application once per `idempotency_key`: called again with a key it has
seen, it answers with the application it already recorded. That is what lets agentd declare the
action idempotent and re-send it after a crash without applying twice.

`$JOBSEARCH_SLOW_APPLY_S` (tests only) waits that long after recording a new application before
answering, so a test can kill agentd while the call is in flight.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

SEED_ROLES = [
    {"role_id": "r1", "company": "Acme Payments", "title": "Backend Engineer (Python)",
     "location": "Berlin", "status": "saved", "saved_at": "2026-11-20"},
    {"role_id": "r2", "company": "Globex", "title": "Platform Engineer",
     "location": "Remote (EU)", "status": "saved", "saved_at": "2026-11-24"},
    {"role_id": "r3", "company": "Initech", "title": "Site Reliability Engineer",
     "location": "Munich", "status": "saved", "saved_at": "2026-11-28"},
]  # fmt: skip


class Role(BaseModel):
    role_id: str
    company: str
    title: str
    location: str
    status: Literal["saved", "applied", "rejected", "offer"]
    saved_at: str


class Application(BaseModel):
    application_id: int
    role_id: str
    note: str
    idempotency_key: str
    applied_at: str


class Applied(BaseModel):
    application: Application
    duplicate: bool  # True: this key was seen before; nothing new was recorded


class RoleList(BaseModel):
    roles: list[Role]


class Store:
    """The app's state in one JSON file; every change under an exclusive lock and replaced
    atomically, so two server processes (an old one still finishing a call after its client
    died, and a new one) never record the same key twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")

    @contextlib.contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self._load()
            yield data
            tmp = self.path.with_name(self.path.name + ".tmp")
            with tmp.open("w") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)

    def read(self) -> dict[str, Any]:
        with self.locked() as data:
            return data

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"roles": SEED_ROLES, "applications": []}
        return dict(json.loads(self.path.read_text()))


def build(store: Store) -> MCPServer:
    app = MCPServer(
        "jobsearch",
        instructions="A job search: saved roles and the applications made to them.",
        log_level="WARNING",  # stdio: stderr is the client's log; keep it quiet
    )

    @app.resource("jobsearch://roles", mime_type="application/json")
    def saved_roles() -> str:
        """Every saved role with its status."""
        return json.dumps(store.read()["roles"])

    @app.resource("jobsearch://roles/{role_id}", mime_type="application/json")
    def one_role(role_id: str) -> str:
        """One saved role and the applications made to it."""
        data = store.read()
        role = _role(data, role_id)
        apps = [a for a in data["applications"] if a["role_id"] == role_id]
        return json.dumps({**role, "applications": apps})

    @app.resource("jobsearch://applications", mime_type="application/json")
    def applications() -> str:
        """Every application made, oldest first."""
        return json.dumps(store.read()["applications"])

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def list_roles(status: str | None = None) -> RoleList:
        """Saved roles, optionally only those with a status (saved, applied, rejected, offer)."""
        roles = store.read()["roles"]
        return RoleList(roles=[Role(**r) for r in roles if status in (None, r["status"])])

    @app.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    def apply_to_role(role_id: str, note: str, idempotency_key: str) -> Applied:
        """Apply to a saved role with a short note. Once per idempotency_key: a repeated key
        returns the application already recorded."""
        if not idempotency_key.strip():
            raise ToolError("idempotency_key must not be empty")
        with store.locked() as data:
            for a in data["applications"]:
                if a["idempotency_key"] == idempotency_key:
                    return Applied(application=Application(**a), duplicate=True)
            role = _role(data, role_id)
            record = {
                "application_id": len(data["applications"]) + 1,
                "role_id": role_id,
                "note": note,
                "idempotency_key": idempotency_key,
                "applied_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            data["applications"].append(record)
            role["status"] = "applied"
        time.sleep(float(os.environ.get("JOBSEARCH_SLOW_APPLY_S") or 0))
        return Applied(application=Application(**record), duplicate=False)

    return app


def _role(data: dict[str, Any], role_id: str) -> dict[str, Any]:
    roles: list[dict[str, Any]] = data["roles"]
    for role in roles:
        if role["role_id"] == role_id:
            return role  # the stored dict: apply_to_role updates its status
    known = ", ".join(r["role_id"] for r in data["roles"])
    raise ToolError(f"no saved role {role_id!r} (saved: {known})")


def bearer_only(app: Any, token: str) -> Any:
    """The ASGI app behind a fixed bearer token (a real app would verify its own tokens)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b"a valid bearer token is required"})
            return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("JOBSEARCH_DATA"))
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("give the data file: --data PATH or $JOBSEARCH_DATA")
    app = build(Store(Path(args.data)))
    if args.http is None:
        app.run("stdio")
        return
    import uvicorn

    asgi = app.streamable_http_app()
    if token := os.environ.get("JOBSEARCH_TOKEN"):
        asgi = bearer_only(asgi, token)
    uvicorn.run(asgi, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
