"""The operator sees the hooks (issue 29, item 4): `agentd event list` names the hook an event
came from, `agentd hooks` lists each hook's URL, events, deliveries accepted and refused (and
why), `doctor` checks each hook's secret and prints the sender's side, and a hook that cannot
authenticate is a config error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agentd.cli import app
from agentd.errors import ConfigError
from tests.conftest import Home
from tests.hooks.hooksupport import SECRETS, body, hooked, secrets, standard

__all__ = ["secrets"]
pytestmark = [pytest.mark.usefixtures("secrets"), pytest.mark.backends]


async def agentd(home: Home, *args: str) -> Any:
    """The CLI in a thread: it asks the daemon, which answers on this test's loop."""
    return await asyncio.to_thread(CliRunner().invoke, app, ["--home", str(home.root), *args])


async def test_hooks_the_operator_sees_each_hook_and_its_deliveries(home: Home, serve: Any) -> None:
    url = await hooked(home, serve)
    raw = body({"type": "deploy.finished"})
    async with httpx.AsyncClient(base_url=url) as c:
        assert (await c.post("/hooks/sw", content=raw, headers=standard(raw))).status_code == 200
        assert (await c.post("/hooks/sw", content=raw)).status_code == 401
    listed = await agentd(home, "event", "list")
    assert "hook:sw" in listed.stdout and "deploy.finished" in listed.stdout
    shown = await agentd(home, "hooks", "--json")
    rows = {r["name"]: r for r in json.loads(shown.stdout)}
    assert rows["sw"]["url"] == f"{url}/hooks/sw"
    assert (rows["sw"]["recorded"], rows["sw"]["accepted"], rows["sw"]["refused"]) == (1, 1, 1)
    assert "401" in next(iter(rows["sw"]["refused_by"]))
    assert rows["am"]["accepted"] == 0
    table = await agentd(home, "hooks")
    assert "/hooks/am" in table.stdout and "refused 401" in table.stdout


async def test_hooks_doctor_checks_secrets_and_prints_the_receiver(
    home: Home, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await hooked(home, serve)
    monkeypatch.delenv("HOOK_GH_SECRET")
    report = await agentd(home, "doctor")
    assert "webhook_configs:" in report.stdout and "/hooks/am" in report.stdout
    assert "credentials_file: /etc/alertmanager/HOOK_AM_TOKEN" in report.stdout
    assert "max_alerts: 500" in report.stdout
    assert "HOOK_GH_SECRET" in report.stdout
    assert SECRETS["HOOK_AM_TOKEN"] not in report.stdout


def test_hooks_a_hook_with_no_way_to_authenticate_is_a_config_error(home: Home) -> None:
    with pytest.raises(ConfigError, match="needs a way to authenticate"):
        home.write_config('[hooks.open]\ntype = "json"\n')
    with pytest.raises(ConfigError, match="URL"):
        home.write_config('[hooks."Bad Name"]\ntype = "json"\ntoken_env = "T"\n')
