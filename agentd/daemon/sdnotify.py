"""systemd notifications (`Type=notify`): READY, WATCHDOG, STOPPING over NOTIFY_SOCKET."""

from __future__ import annotations

import socket

from agentd import config


def notify(message: str) -> bool:
    """Send one notification; False when not under systemd (no socket) or it could not be sent."""
    addr = config.notify_socket()
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(addr)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True
