"""A hook's secrets named as everywhere else in config.toml (issue 29 item 1): `token =
"{secret:NAME}"` and `secret = "{secret:NAME}"` are `token_env` / `secret_env` = "NAME"; a value
written in their place is a config error, never a secret in the file."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentd.errors import ConfigError
from tests.api.test_api import FINISH
from tests.conftest import Home, closed_port
from tests.hooks.hooksupport import SECRETS, body, events, secrets, standard

__all__ = ["secrets"]  # the fixture, used by name
pytestmark = pytest.mark.usefixtures("secrets")
CONFIG = """
[api]
port = {port}

[hooks.tok]
type = "json"
token = "{{secret:HOOK_TOKEN}}"
event = "deploy"

[hooks.sw]
type = "json"
secret = "{{secret:HOOK_SW_SECRET}}"
event = "signed"

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""


async def test_hooks_secret_placeholders_authenticate(home: Home, serve: Any) -> None:
    port = closed_port()
    hooks = home.write_config(CONFIG.format(port=port), [FINISH]).hooks
    await serve()
    raw = body({"v": 1})
    auth = {"Authorization": f"Bearer {SECRETS['HOOK_TOKEN']}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
        assert (await c.post("/hooks/tok", json={"v": 1})).status_code == 401
        assert (await c.post("/hooks/tok", json={"v": 1}, headers=auth)).status_code == 200
        assert (await c.post("/hooks/sw", content=raw, headers=standard(raw))).status_code == 200
    assert sorted(e.name for e in events(home)) == ["deploy", "signed"]
    assert (hooks["tok"].token_env, hooks["sw"].secret_env) == ("HOOK_TOKEN", "HOOK_SW_SECRET")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('token = "am-token-0123456789"', "names a secret, never holds it"),
        ('token = "Bearer {secret:T}"', "names a secret, never holds it"),
        ('token = "{secret:A}"\ntoken_env = "B"', "name two secrets"),
    ],
)
def test_hooks_a_secret_written_as_a_value_is_a_config_error(
    home: Home, line: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        home.write_config(f'[hooks.am]\ntype = "alertmanager"\n{line}\n')
