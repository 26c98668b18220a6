"""The IMAP session's TLS against a real Dovecot: implicit TLS (993-style) and STARTTLS (which
aioimaplib lacks: agentd/outside/imap.py upgrades the connection itself) both log in and read the
mailbox; a certificate the client does not trust is refused, naming the server."""

from __future__ import annotations

import pytest

from agentd.errors import ActionFailed
from agentd.outside import imap
from tests.dovecot_server import Dovecot, message

pytestmark = [pytest.mark.timeout(60)]


@pytest.mark.parametrize("mode", ["implicit", "starttls"])
async def test_imap_tls_logs_in_and_reads(dovecot_tls: Dovecot, mode: str) -> None:
    dovecot_tls.deliver(message("over tls"))
    port = dovecot_tls.imaps_port if mode == "implicit" else dovecot_tls.port
    async with imap.connect(
        "127.0.0.1", port, mode, dovecot_tls.user, dovecot_tls.password,
        timeout_s=20, ca_file=dovecot_tls.dir / "cert.pem",
    ) as s:  # fmt: skip
        selected = await s.select("INBOX")
        assert selected.exists == 1
        (fetched,) = await s.fetch(await s.search("ALL"), 4096)
        assert b"Subject: over tls" in fetched.raw


@pytest.mark.parametrize("mode", ["implicit", "starttls"])
async def test_imap_tls_untrusted_certificate_is_refused(dovecot_tls: Dovecot, mode: str) -> None:
    port = dovecot_tls.imaps_port if mode == "implicit" else dovecot_tls.port
    with pytest.raises(ActionFailed, match=f"imap://127.0.0.1:{port}") as err:
        async with imap.connect(
            "127.0.0.1", port, mode, dovecot_tls.user, dovecot_tls.password, timeout_s=20
        ):
            pass
    assert dovecot_tls.password not in str(err.value)
