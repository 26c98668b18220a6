"""Channel settings that decide whether a message can be trusted: email without TLS only to a
loopback relay, implicit TLS (port 465) against an in-process aiosmtpd server, config errors that
name the key, and `agentd doctor` warning of a webhook nobody can verify."""

from __future__ import annotations

import ssl
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentd.cli import doctor
from agentd.config.notify import EmailNotify
from agentd.errors import ConfigError
from agentd.models import InboxKind
from tests.conftest import Home, closed_port
from tests.notify import test_notify
from tests.notify.test_notify import _tls_files, config_text

# test_notify's fixtures, shared: a webhook receiver, and a migrated home with a Sender on a clock.
receiver, rig = test_notify.receiver, test_notify.rig


def email_table(host: str, extra: str = "", port: int = 587) -> str:
    return textwrap.dedent(f"""
        [notify.mail]
        type = "email"
        host = "{host}"
        port = {port}
        from = "agentd@example.test"
        to = ["ops@example.test"]
        """) + textwrap.dedent(extra)


@pytest.mark.parametrize("host", ["smtp.example.com", "10.0.0.5", "127.0.0.1.example.com"])
def test_notify_email_without_tls_is_refused_off_loopback(home: Home, host: str) -> None:
    with pytest.raises(ConfigError) as e:
        home.write_config(
            config_text("http://127.0.0.1:1", extra=email_table(host, 'tls = "none"'))
        )
    assert "notify.mail.tls:" in str(e.value) and "line " in str(e.value)
    assert 'tls = "starttls" (port 587) or tls = "implicit" (port 465)' in str(e.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.53"])
def test_notify_email_without_tls_is_allowed_to_a_loopback_relay(home: Home, host: str) -> None:
    cfg = home.write_config(
        config_text("http://127.0.0.1:1", extra=email_table(host, 'tls = "none"'))
    )
    mail = cfg.notify["mail"]
    assert isinstance(mail, EmailNotify) and mail.tls == "none"


@pytest.mark.parametrize(("tls", "port"), [("starttls", 587), ("implicit", 465), ("none", 587)])
def test_notify_email_port_defaults_to_the_tls_mode(home: Home, tls: str, port: int) -> None:
    table = email_table("127.0.0.1", f'tls = "{tls}"').replace("port = 587\n", "")
    cfg = home.write_config(config_text("http://127.0.0.1:1", extra=table))
    mail = cfg.notify["mail"]
    assert isinstance(mail, EmailNotify) and mail.port == port


def test_notify_email_login_names_the_key_to_fix(home: Home) -> None:
    no_tls = email_table("127.0.0.1", 'tls = "none"\nusername = "a"\npassword_env = "SMTP_PW"\n')
    with pytest.raises(ConfigError, match=r"notify\.mail\.password_env: .*only sent over TLS"):
        home.write_config(config_text("http://127.0.0.1:1", extra=no_tls))
    alone = email_table("smtp.example.com", 'username = "a"\n')
    with pytest.raises(ConfigError, match=r"notify\.mail\.password_env: .*username needs"):
        home.write_config(config_text("http://127.0.0.1:1", extra=alone))


async def test_notify_email_over_implicit_tls_with_login(
    rig: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    cert, key = _tls_files(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    mails: list[tuple[bool, Any]] = []
    logins: list[bytes] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            # session.ssl is only set by STARTTLS: ask the connection itself.
            mails.append((server.transport.get_extra_info("ssl_object") is not None, envelope))
            return "250 OK"

    def auth(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        logins.append(data.password)
        return AuthResult(success=data.password == b"hunter2")

    port = closed_port()
    # ssl_context: TLS from the first byte (SMTPS, port 465), no STARTTLS offered; aiosmtpd's
    # auth_require_tls counts STARTTLS only, and the TLS here is checked in handle_DATA.
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, ssl_context=tls,
                      authenticator=auth, auth_require_tls=False)  # fmt: skip
    smtp.start()
    monkeypatch.setenv("AGENTD_TEST_SMTP_PASSWORD", "hunter2")
    try:
        extra = email_table("127.0.0.1", port=port, extra=f"""
            tls = "implicit"
            username = "agentd"
            password_env = "AGENTD_TEST_SMTP_PASSWORD"
            ca_file = "{cert}"
            """)  # fmt: skip
        text = config_text("http://127.0.0.1:1", extra=extra)
        r = await rig(text.replace('channels = ["ops"]', 'channels = ["mail"]'))
        item_id = r.post(InboxKind.APPROVAL, title="approve deploy?", action="deploy")
        await r.settle()
    finally:
        smtp.stop()
    assert logins == [b"hunter2"] and len(mails) == 1
    over_tls, envelope = mails[0]
    assert over_tls and envelope.rcpt_tos == ["ops@example.test"]
    assert f"(item {item_id}): approve deploy?" in envelope.content.decode()


def test_doctor_warns_of_an_unsigned_webhook(home: Home) -> None:
    """A webhook without secret_env delivers, but its receivers cannot verify it: a warning
    (not required), so `agentd doctor` still passes."""
    unsigned = config_text("http://127.0.0.1:1").replace('secret_env = "AGENTD_TEST_WHSEC"\n', "")
    home.write_config(unsigned)
    home.store  # noqa: B018  # migrates
    report = doctor.examine(home.paths, None)
    check = next(c for c in report.checks if c.name == "notify ops")
    assert not check.ok and not check.required
    assert "unsigned" in check.message and "secret_env" in check.message
    assert "notify ops" not in [c.name for c in report.checks if c.required and not c.ok]
