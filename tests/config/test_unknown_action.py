"""A misspelled action in an agent's menu names the likeliest one meant and lists the config's own
actions, not only the built-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd import config
from agentd.errors import ConfigError

CONFIG = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[actions.restart_checkout]
type = "command"
argv = ["true"]

[agents.default]
actions = ["restart_chekout", "finish"]
"""


def test_config_misspelled_action_says_did_you_mean_and_lists_the_own_actions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    said = str(e.value)
    assert "unknown action 'restart_chekout' (did you mean 'restart_checkout'?" in said
    assert "use one of restart_checkout, " in said
