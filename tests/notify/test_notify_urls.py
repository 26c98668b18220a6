"""A webhook URL's secret (in its path or query) stays out of what a failed delivery says: the
outbox's error, the daemon's log line, `agentd status` and `agentd doctor` show the scheme and host
only — errors written by older code included. A `{secret:NAME}` in a webhook URL is filled at
delivery from the daemon's environment, so the secret need not be written in the file."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog

from agentd.db import outbox
from agentd.db.store import Store
from agentd.models import InboxKind
from tests.cli.test_doctor_checks import AGENTD
from tests.conftest import Home
from tests.notify.test_notify import NOON, Receiver, Rig, config_text

PATH_SECRET = "Xk9fQ2mZ7pLwR4tV8bN3cH6j"
QUERY_SECRET = "SECRETVALUE"
SECRETS = (PATH_SECRET, QUERY_SECRET)


@pytest.fixture
async def rig(home: Home, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Callable[..., Any]]:
    """A Rig (tests/notify/test_notify.py) on a config whose webhook URL is `url`."""
    monkeypatch.setenv("AGENTD_TEST_WHSEC", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    made: list[Store] = []

    async def make(url: str) -> Rig:
        from agentd.clock import ManualClock

        # config_text appends /hook to the URL it is given: the secrets follow it.
        cfg = home.write_config(config_text(url))
        home.store  # noqa: B018  # migrates
        store = Store(home.paths.db)
        await store.open()
        made.append(store)
        return Rig(home, store, ManualClock(NOON), cfg)

    yield make
    for s in made:
        await s.close()


def cli(home: Home, *args: str) -> str:
    home.close()
    home._store = None
    done = subprocess.run(
        [*AGENTD, "--home", str(home.root), *args], capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


async def test_failing_webhook_delivery_and_status_show_no_url_secret(rig: Any, home: Home) -> None:
    down = Receiver(status=500)
    try:
        r = await rig(f"{down.url}/{PATH_SECRET}?token={QUERY_SECRET}&x=")
        r.post(InboxKind.APPROVAL, title="deploy?")
        with structlog.testing.capture_logs() as logs:
            await r.settle()
    finally:
        down.close()

    assert len(down.got) == 1  # it was sent, to the full URL, and answered 500
    error = r.health()["ops"]["error"]
    assert "HTTP 500" in error and f"127.0.0.1:{down.port}" in error
    shown = [error, json.dumps(logs), cli(home, "status"), cli(home, "status", "--json")]
    shown.append(cli(home, "doctor"))
    assert "ops failing" in shown[2]
    for text in shown:
        for secret in SECRETS:
            assert secret not in text, text


async def test_status_hides_the_url_in_an_error_written_by_older_code(rig: Any, home: Home) -> None:
    r = await rig("http://127.0.0.1:9")
    r.post(InboxKind.QUESTION, title="which region?")
    await r.sender.tick()  # planned, not yet tried
    old = f"http://127.0.0.1:9/hook/{PATH_SECRET}?token={QUERY_SECRET}: ConnectError: refused"
    home.store.write(
        lambda c: outbox.attempt_failed(
            c, c.execute("SELECT outbox_id FROM outbox").fetchone()[0], NOON, old, NOON + 60
        )
    )

    status = cli(home, "status")

    assert "ops failing" in status and "127.0.0.1:9" in status
    for secret in SECRETS:
        assert secret not in status


async def test_webhook_url_secret_placeholder_is_filled_at_delivery(
    rig: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_TEST_HOOK_PATH", PATH_SECRET)
    up = Receiver()
    try:
        r = await rig(f"{up.url}/{{secret:AGENTD_TEST_HOOK_PATH}}")
        r.post(InboxKind.APPROVAL, title="deploy?")
        await r.settle()
    finally:
        up.close()

    assert [g["path"] for g in up.got] == [f"/{PATH_SECRET}/hook"]
    assert r.health()["ops"]["failing"] is False


async def test_webhook_url_secret_not_set_is_named_and_nothing_is_sent(rig: Any) -> None:
    up = Receiver()
    try:
        r = await rig(f"{up.url}/{{secret:AGENTD_TEST_UNSET_HOOK}}")
        r.post(InboxKind.APPROVAL, title="deploy?")
        await r.settle()
    finally:
        up.close()

    assert up.got == []
    assert "$AGENTD_TEST_UNSET_HOOK" in r.health()["ops"]["error"]
