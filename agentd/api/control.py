"""The daemon's answers to what a shell cannot learn by itself (agentd/operator/control.py asks):
`GET /api/daemon/sees?names=A,B` says which of the config's secrets this process's environment
holds (true/false per name, never a value; null for a name neither the config in force nor the one
on disk reads), and `POST /api/daemon/reload` reloads the config and answers with the verdict.
Reload is served over the unix socket only: it is the home owner's, not a token holder's on the
port.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentd import config
from agentd.config import Config, Paths
from agentd.errors import AgentdError
from agentd.operator import control
from agentd.text import to_json

Reload = Callable[[], Awaitable[dict[str, Any]]]


def _json(value: Any, status: int = 200) -> Response:
    return Response(to_json(value), status_code=status, media_type="application/json")


class Control:
    """The routes; `on_reload` is the daemon's reload (set by agentd/daemon/serve.py)."""

    def __init__(self, paths: Paths, current: Callable[[], Config]) -> None:
        self.paths = paths
        self.current = current
        self.on_reload: Reload | None = None

    def routes(self) -> list[Route]:
        return [
            Route(control.SEES_PATH, self._sees, methods=["GET"]),
            Route(control.RELOAD_PATH, self._reload, methods=["POST"]),
        ]

    def _readable(self) -> set[str]:
        """The names a config reads: the one in force, and the one on disk (doctor checks that
        one; a name it adds is read at the next reload)."""
        names = control.secret_names(self.current())
        with contextlib.suppress(AgentdError):  # an invalid file names nothing it would read
            names |= control.secret_names(config.load(self.paths.config))
        return names

    async def _sees(self, request: Request) -> Response:
        asked = [n for n in request.query_params.get("names", "").split(",") if n]
        if len(asked) > control.MAX_NAMES:
            return _json({"error": f"at most {control.MAX_NAMES} names at once"}, 400)
        readable = self._readable()
        sees = {n: config.secret(n) is not None if n in readable else None for n in asked}
        return _json({"sees": sees})

    async def _reload(self, request: Request) -> Response:
        if (request.scope.get("server") or ("", None))[1] is not None:  # a TCP port
            return _json({"error": "reload is asked over the unix socket (agentd reload)"}, 403)
        if self.on_reload is None:
            return _json({"error": "this daemon is still starting; ask again"}, 503)
        return _json(await self.on_reload())
