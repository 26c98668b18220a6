"""Asking the running daemon over its control socket (api.sock) what the CLI cannot see or do
itself: which of the config's secrets its environment holds (yes or no per name, never a value),
and to reload the config and say how it went. `secret_names` is the list of names a config reads:
the daemon answers only for those, so the endpoint is no oracle of its environment.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from agentd.config import SECRET_PLACEHOLDER, CommandAction, Config, HttpAction, McpServerRef, Paths

SEES_PATH = "/api/daemon/sees"
RELOAD_PATH = "/api/daemon/reload"
SEES_TIMEOUT_S = 2.0
RELOAD_TIMEOUT_S = 30.0  # a reload builds clients and writes twice: milliseconds, unless stuck
MAX_NAMES = 200


def secret_names(cfg: Config) -> set[str]:
    """Every variable (or systemd credential) name the config reads a secret from."""
    names: set[str] = set()
    for model in cfg.models.values():
        env = getattr(model, "api_key_env", None)
        names |= {env} if isinstance(env, str) else set()
    for table in [*cfg.actions.values(), *cfg.sources.values()]:
        if isinstance(table, HttpAction | McpServerRef):
            names |= set(table.secret_names())
        elif isinstance(table, CommandAction):
            names |= set(table.secret_env.values())
    for channel in cfg.notify.values():
        for key in ("secret_env", "token_env", "password_env"):
            env = getattr(channel, key, None)
            names |= {env} if isinstance(env, str) else set()
        names |= set(SECRET_PLACEHOLDER.findall(getattr(channel, "url", "") or ""))
    for hook in cfg.hooks.values():
        names |= set(hook.secret_names())
    return names


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout_s: float) -> None:
        super().__init__("localhost", timeout=timeout_s)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def call(paths: Paths, method: str, path: str, timeout_s: float) -> tuple[int, Any] | None:
    """One request to the daemon with the home's token: (status, JSON body), or None when no
    daemon answers on the socket (none, a stale socket, no token). TimeoutError propagates: a
    daemon that holds the socket but does not answer is not "no daemon"."""
    try:  # a home of another user (systemd's) may not even be ours to look into
        if not paths.api_sock.exists():
            return None
        token = paths.api_token.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    conn = _Unix(paths.api_sock, timeout_s)
    try:
        conn.request(method, path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        body = response.read()
    except TimeoutError:
        raise
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    try:
        return response.status, json.loads(body)
    except ValueError:
        return response.status, None


def daemon_sees(paths: Paths, names: Iterable[str]) -> dict[str, bool | None] | None:
    """For each name, whether the running daemon's environment holds it (None: not a name its
    config reads); None when the daemon cannot be asked (down, silent, from before this ask)."""
    wanted = sorted(set(names))[:MAX_NAMES]
    if not wanted:
        return {}
    try:
        answer = call(paths, "GET", f"{SEES_PATH}?{urlencode({'names': ','.join(wanted)})}",
                      SEES_TIMEOUT_S)  # fmt: skip
    except TimeoutError:
        return None
    if answer is None or answer[0] != 200 or not isinstance(answer[1], dict):
        return None
    seen = answer[1].get("sees")
    if not isinstance(seen, dict):
        return None
    return {n: seen.get(n) if isinstance(seen.get(n), bool) else None for n in wanted}


def ask_reload(paths: Paths, timeout_s: float = RELOAD_TIMEOUT_S) -> dict[str, Any] | None:
    """Ask the daemon to reload and wait for its verdict (`{"applied", "error", "restart",
    "sha256", "pid"}`); None when it cannot be asked this way (no socket, a daemon from before
    this endpoint): then a signal is all there is. TimeoutError: it did not answer in time."""
    answer = call(paths, "POST", RELOAD_PATH, timeout_s)
    if answer is None or answer[0] == 404 or not isinstance(answer[1], dict):
        return None
    return answer[1]
