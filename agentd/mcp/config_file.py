"""The config `agentd mcp` (stdio) serves with: config.toml as it is now. The process may live for
days beside the daemon, so the file is read again at each request; a file that does not validate
is logged and the config loaded before is kept, as the daemon's reload does."""

from __future__ import annotations

from pathlib import Path

import structlog

from agentd import config
from agentd.config import Config
from agentd.errors import ConfigError

log = structlog.get_logger("agentd.mcp")


class ConfigFile:
    """Call it for the config in force: the file's, re-parsed only when its bytes changed."""

    def __init__(self, path: Path, loaded: Config) -> None:
        self.path = path
        self.current = loaded
        self._seen = self._read()

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:
            return None

    def __call__(self) -> Config:
        raw = self._read()
        if raw is None or raw == self._seen:  # gone or unreadable for now: keep what we have
            return self.current
        self._seen = raw
        try:
            self.current = config.parse(raw.decode(errors="replace"), self.path)
        except ConfigError as e:
            log.warning("mcp.config_invalid", error=str(e),
                        note="the config loaded before is kept; fix the file")  # fmt: skip
        else:
            log.info("mcp.config_reloaded", path=str(self.path))
        return self.current
