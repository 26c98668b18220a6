"""The store URL's secrets never reach a message: its label leaves out the password and every
parameter that carries a secret (`sslpassword=` too), and a driver error that quotes a secret
back (libpq does, for a bare `%` in a password) has it blotted out — in the StateError every
command shows, in doctor's connection finding, and in the listener's last error. Real libpq."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentd.db.postgres import checks, connection
from agentd.db.postgres.listener import Listener
from agentd.errors import StateError

PASSWORD = "pa%ss99word"  # a bare %: libpq refuses the URL and quotes the token back
SSL_PASSWORD = "hunter2-key-pass"
URLS = [
    f"postgresql://me:{PASSWORD}@/agentd?host=/nonexistent",
    f"postgresql://me@/agentd?host=/nonexistent&sslpassword={SSL_PASSWORD}&password={PASSWORD}",
    f"host=/nonexistent dbname=agentd password='{PASSWORD}' sslpassword={SSL_PASSWORD}",
]


def clean(text: str) -> bool:
    return PASSWORD not in text and SSL_PASSWORD not in text and "ss99word" not in text


@pytest.mark.parametrize("url", URLS)
def test_store_url_label_leaves_out_every_secret(url: str) -> None:
    shown = connection.label(url)
    assert clean(shown), shown
    assert "agentd" in shown


@pytest.mark.parametrize("url", URLS)
def test_store_url_secrets_never_reach_a_driver_message(url: str, tmp_path: Path) -> None:
    with pytest.raises(StateError) as raised:
        connection.connect(url)
    assert clean(str(raised.value)), str(raised.value)
    (found,) = checks.examine(url, 30.0)
    assert not found.ok and clean(found.message), found.message
    listener = Listener(url, lambda: None)
    listener.start()
    try:
        deadline = time.monotonic() + 20
        while not listener.last_error:
            assert time.monotonic() < deadline, "the listener never failed"
            time.sleep(0.01)
        assert clean(listener.last_error), listener.last_error
    finally:
        listener.stop()


def test_store_url_a_short_or_absent_password_blots_nothing_else() -> None:
    assert connection.redact("could not connect to agentd", "postgresql://me:ab@/agentd") == (
        "could not connect to agentd"
    )
    assert connection.redact("x", "postgresql://me@/agentd") == "x"
