"""Where a home's state lives: its SQLite file, or the PostgreSQL URL its `[store]` names
(config/store.py). Read from the config file's [store] table alone (tomllib; pydantic only when
the table is there), so every command finds its database without loading the whole config.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from agentd.config.home import CONFIG_NAME, secret
from agentd.errors import ConfigError

if TYPE_CHECKING:
    from agentd.config.store import StoreConfig

SCHEMES = ("postgresql://", "postgres://")


def home_store_url(home: Path) -> str | None:
    """The PostgreSQL URL of the home at `home`, or None for its SQLite file."""
    return store_url(home / CONFIG_NAME)


def home_store(home: Path) -> tuple[str, StoreConfig] | None:
    """The PostgreSQL URL of the home at `home` with its [store] table, or None for SQLite."""
    cfg = store_config(home / CONFIG_NAME)
    if cfg is None:
        return None
    url = resolve(cfg, home / CONFIG_NAME)
    return None if url is None else (url, cfg)


def store_url(config_path: Path) -> str | None:
    """The PostgreSQL URL the home at `config_path`'s folder uses, or None for its SQLite file.

    A missing config file means the embedded default; a `url_env` naming nothing set is an error
    (a daemon must never quietly fall back to a fresh SQLite file beside a shared database)."""
    cfg = store_config(config_path)
    return None if cfg is None else resolve(cfg, config_path)


def store_config(config_path: Path) -> StoreConfig | None:
    """The validated [store] table of the config at `config_path`, or None without one."""
    try:
        text = config_path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{config_path}: cannot read config: {e.strerror}") from None
    if "[store" not in text and "store." not in text and "store =" not in text:
        return None  # the common case, without parsing the file
    try:
        table = tomllib.loads(text).get("store")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{config_path}: invalid TOML: {e}") from None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path}: store: expected a table ([store])")
    from agentd.config.store import StoreConfig

    try:
        return StoreConfig.model_validate(table)
    except ValueError as e:
        first = str(e).splitlines()
        raise ConfigError(f"{config_path}: [store]: {first[-1].strip() if first else e}") from None


def resolve(cfg: StoreConfig, config_path: Path) -> str | None:
    """The URL of a validated [store], reading `url_env` now."""
    if cfg.url_env is None:
        return cfg.url
    url = secret(cfg.url_env)
    if url is None:
        raise ConfigError(
            f"{config_path}: [store] url_env = {cfg.url_env!r}, but neither the variable nor a "
            f"systemd credential of that name is set; export {cfg.url_env}=postgresql://… "
            "(or LoadCredential= it in the unit)"
        )
    if not url.startswith(SCHEMES):
        raise ConfigError(
            f"{config_path}: [store] url_env = {cfg.url_env!r} holds no postgresql:// URL"
        )
    return url
