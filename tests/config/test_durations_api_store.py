"""[api] and [store] take durations as every other seconds key of config.toml does ("5s", "1m"),
and a bad one is refused naming the key and the syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd import config
from agentd.errors import ConfigError

CONFIG = """\
[api]
safety_scan_s = {scan}
request_timeout_s = "30s"

[store]
url = "postgresql://agentd@127.0.0.1/agentd"
lease_s = "1m"

[models.default]
provider = "scripted"
replies = "replies.json"
"""


def load(tmp_path: Path, scan: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG.format(scan=scan))
    return config.load(path)


def test_api_and_store_take_durations(tmp_path: Path) -> None:
    cfg = load(tmp_path, '"10s"')
    assert (cfg.api.safety_scan_s, cfg.api.request_timeout_s) == (10.0, 30.0)
    assert cfg.store.lease_s == 60.0
    assert load(tmp_path, "2.5").api.safety_scan_s == 2.5  # plain numbers are still seconds


def test_a_bad_duration_in_api_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load(tmp_path, '"5 parsecs"')
    assert "safety_scan_s" in str(e.value) and "write e.g. 90s, 45m, 4h or 1d" in str(e.value)
