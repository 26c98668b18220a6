"""One duration syntax everywhere: every seconds key of config.toml (`*_s`) takes "5s", "45m",
"4h", "1d" as the notify settings do — a watch's interval, a check-in's bounds, the daemon's
timings, an action's timeout — and a bad one is refused naming the key and the syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd import config
from agentd.errors import ConfigError

CONFIG = """\
[daemon]
watchdog_interval_s = "10s"

[models.default]
provider = "scripted"
replies = "replies.json"

[sources.checkout]
type = "http"
url = "http://127.0.0.1:9/health"
timeout_s = "3s"

[actions.restart]
type = "command"
argv = ["true"]
timeout_s = "2m"

[agents.default]
actions = ["restart", "finish"]
sources = ["checkout"]
watch = {{ interval_s = {interval} }}
checkin = {{ min_s = "1h", every_s = "1d" }}
"""


def load(tmp_path: Path, interval: str) -> config.Config:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG.format(interval=interval))
    return config.load(path)


def test_config_seconds_keys_take_durations_as_notify_does(tmp_path: Path) -> None:
    cfg = load(tmp_path, '"5s"')
    agent = cfg.agents["default"]
    assert agent.watch is not None and agent.watch.interval_s == 5.0
    assert (agent.checkin.min_s, agent.checkin.every_s) == (3600.0, 86400.0)
    assert cfg.actions["restart"].timeout_s == 120.0
    assert cfg.sources["checkout"].timeout_s == 3.0
    assert cfg.daemon.watchdog_interval_s == 10.0


def test_config_plain_numbers_still_mean_seconds(tmp_path: Path) -> None:
    assert load(tmp_path, "0.5").agents["default"].watch.interval_s == 0.5  # type: ignore[union-attr]


def test_config_bad_duration_names_the_key_and_the_syntax(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load(tmp_path, '"5 parsecs"')
    assert "interval_s" in str(e.value) and "write e.g. 90s, 45m, 4h or 1d" in str(e.value)
