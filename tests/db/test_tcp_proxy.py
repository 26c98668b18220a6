"""tests/tcp_proxy.py's reset ends every connection, even one accepted while the reset ran: that
one used to be registered after reset() had taken the pairs, and stayed open with its pumps gone
— silent, as if blackholed, in a test that meant a reset (issue 31's outage tests)."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path
from typing import Any

import pytest

from tests import tcp_proxy
from tests.tcp_proxy import Proxy


def test_a_connection_accepted_during_a_reset_is_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(target))
    server.listen(4)
    proxy = Proxy(target)
    plain = socket.socket

    class ResetWhileDialing(plain):
        def connect(self, address: Any) -> None:
            super().connect(address)
            proxy.reset()  # lands between the accept and the pair's registration

    def dialing(family: int = -1, *args: Any, **kw: Any) -> socket.socket:
        if family == socket.AF_UNIX and not kw:  # the proxy's dial (accept() passes fileno=)
            return ResetWhileDialing(family, *args)
        return plain(family, *args, **kw)

    monkeypatch.setattr(tcp_proxy.socket, "socket", dialing)
    proxy.start()
    client = plain(socket.AF_INET, socket.SOCK_STREAM)
    try:
        client.connect(("127.0.0.1", proxy.port))
        client.settimeout(30)  # a generous bound: the reset answers at once
        with contextlib.suppress(ConnectionResetError):
            assert client.recv(1) == b""
    finally:
        client.close()
        proxy.close()
        server.close()
