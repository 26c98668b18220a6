"""Where a home keeps its files, and what the process's environment says: the only reader of
`os.environ` (the home, systemd's sockets and credentials, the log format, named secrets).
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_NAME = "config.toml"
DB_NAME = "agentd.db"


class Paths:
    """Where one agentd home keeps its files."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / CONFIG_NAME
        self.db = home / DB_NAME
        self.lock = home / "agentd.lock"
        self.api_sock = home / "api.sock"  # the daemon's control API (mode 0600; db/poke.py)
        self.api_token = home / "api.token"  # the web inbox's login and the API's Bearer token


def default_home() -> Path:
    """`AGENTD_HOME`, else `$XDG_DATA_HOME/agentd`, else `~/.local/share/agentd`."""
    if env := os.environ.get("AGENTD_HOME"):
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "agentd"


SCRUBBED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER")


def base_env() -> dict[str, str]:
    """The environment commands and command sources start from: no secrets, just the basics."""
    env = {k: os.environ[k] for k in SCRUBBED_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def notify_socket() -> str | None:
    """systemd's notification socket, when running under `Type=notify`."""
    return os.environ.get("NOTIFY_SOCKET") or None


def watchdog_interval_s() -> float | None:
    """Half of systemd's WatchdogSec, when the unit sets one."""
    usec = os.environ.get("WATCHDOG_USEC")
    return int(usec) / 2e6 if usec and usec.isdigit() else None


def log_format() -> str:
    """`json` or `console`; AGENTD_LOG_FORMAT overrides the terminal-based default."""
    return os.environ.get("AGENTD_LOG_FORMAT", "")


def journal_stream() -> tuple[int, int] | None:
    """The device and inode systemd connected stdout/stderr to, when they go to the journal
    (`JOURNAL_STREAM=dev:ino`); a process compares them with its stream to know it is so."""
    dev, _, ino = os.environ.get("JOURNAL_STREAM", "").partition(":")
    return (int(dev), int(ino)) if dev.isdigit() and ino.isdigit() else None


def secret(env_name: str) -> str | None:
    """The value of a named secret; callers must never log or store it.

    A systemd credential of that name wins (`LoadCredential=ANTHROPIC_API_KEY:/etc/agentd/key`
    puts it in `$CREDENTIALS_DIRECTORY`, never in the process environment); else the variable.
    """
    creds = os.environ.get("CREDENTIALS_DIRECTORY")
    if creds and "/" not in env_name and env_name not in ("", ".", ".."):
        try:
            return (Path(creds) / env_name).read_text().strip() or None
        except OSError:
            pass  # no credential of that name: fall back to the environment
    return os.environ.get(env_name) or None
