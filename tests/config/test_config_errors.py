"""Config errors name the table's own line and say in words what is missing: a table without
its `type` (or with it misspelled) is not pydantic's "Unable to extract tag"."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.config.file import parse
from agentd.errors import ConfigError

MISSPELT = """\
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
sources = ["web"]
actions = ["finish"]

[sources.web]
tpye = "http"
url = "http://127.0.0.1:1/health"
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text, Path("agentd.toml"))
    return str(caught.value)


def test_config_misspelt_type_names_the_tables_own_line_and_the_fix() -> None:
    message = error_of(MISSPELT)
    assert "Unable to extract tag" not in message
    assert "line 9, sources.web:" in message  # [sources.web], not `sources = ["web"]` on line 6
    assert '[sources.web] has no "type"; did you mean "type" (found "tpye")?' in message
    assert "one of: http, command, file_tail, mcp" in message


def test_config_missing_provider_says_which_values_it_may_take() -> None:
    message = error_of('[models.default]\nreplies = "r.json"\n')
    assert 'line 1, models.default: [models.default] has no "provider"; one of: ' in message
    assert "did you mean" not in message and "scripted" in message


def test_config_error_under_a_commented_header_names_the_keys_line() -> None:
    # `agentd init` writes headers with comments after them: the key's own line, not the
    # agent's header two tables up (line 4 was said for line 10)
    text = (
        '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
        '[agents.default]\nactions = ["finish"]\n\n'
        "[agents.default.notify]   # which items reach the operator\n"
        "channels = []\n"
        'remind_after = ["3x"]\n'
    )
    assert "line 10, agents.default.notify.remind_after:" in error_of(text)
