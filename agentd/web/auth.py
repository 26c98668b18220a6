"""Who may use the API and the pages: a random token in a 0600 file in the home (the login,
and the JSON API's Bearer token; the daemon reads it again when the file changes), a strict
trusted-host check against DNS rebinding, refusal of cross-site form posts, and the local paths a
login may return to. A login's session is its own (agentd/operator/sessions.py, web/keys.py)."""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from agentd.errors import ConfigError
from agentd.operator import home

# What older versions kept the session in: a cookie goes to every port of 127.0.0.1 (another
# local server sees it), so it grants nothing now, and a login deletes it.
LEGACY_COOKIE = "agentd_session"
# A DNS-rebinding page reaches 127.0.0.1 under its own name: only these names are served.
TRUSTED_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
# A Host header: a name or a bracketed IPv6 address, then at most a port (digits, nothing else).
HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]{1,5}))?")


MIN_TOKEN_CHARS, strong = home.MIN_TOKEN_CHARS, home.strong_token


def token(path: Path) -> str:
    """The home's token, created (0600, never readable by others) on first use. A file emptied or
    rewritten with a short value is a ConfigError saying how to replace it."""
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)  # a copied file keeps working, but not for others
    value = path.read_text().strip()
    if not strong(value):
        raise ConfigError(
            f"{path} holds {'no token' if not value else 'a token too short to be safe'} "
            f"(at least {MIN_TOKEN_CHARS} characters): run `agentd web --rotate` to write a new one"
        )
    return value


def rotate(path: Path) -> str:
    """A new token, written beside the file (0600) and renamed over it: a reader never sees it
    half-written, and a daemon's next request uses it (see `Token`)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")
    tmp.replace(path)
    return path.read_text().strip()


class Token:
    """The token as the daemon knows it: the file is read again when its stat changes (mtime,
    size, inode), so a token rewritten in place or renamed over the file (a rotation) takes
    effect at the next request, and every session opened with the old one is over."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._value = token(path)

    def current(self) -> str:
        try:
            st = self.path.stat()
        except OSError:
            return self._value  # removed: the last one holds until a new file appears
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            with contextlib.suppress(OSError):
                value = self.path.read_text().strip()
                if strong(value):  # half-written, emptied or weak: the last good one holds
                    self._value, self._stamp = value, stamp
        return self._value


def same(given: str | None, expected: str) -> bool:
    """`given` is the (non-empty) secret, compared in constant time."""
    if given is None or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer_ok(headers: Mapping[str, str], secret: str) -> bool:
    scheme, _, given = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and same(given.strip(), secret)


def host_name(host: str) -> str | None:
    """`localhost:8765` → `localhost`, `[::1]:8765` → `[::1]`; None for anything else than a
    name and an optional port (`[::1]evil`, `localhost:80x`, `localhost:`)."""
    parts = HOST.fullmatch(host.lower())
    if parts is None or (parts[2] is not None and not 0 < int(parts[2]) < 65536):
        return None
    return parts[1]


def host_trusted(host: str) -> bool:
    return host_name(host) in TRUSTED_HOSTS


def cross_site(headers: Mapping[str, str]) -> str | None:
    """Why a state-changing request comes from another site, or None when it does not."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        # Set by the browser itself, so it decides when present: our pages' `Referrer-Policy:
        # no-referrer` makes a browser send `Origin: null` with their own forms.
        return None if fetch_site in ("same-origin", "none") else f"Sec-Fetch-Site: {fetch_site}"
    origin = headers.get("origin")
    if origin is None:
        return None  # not a browser's cross-site request (curl, the CLI, an old browser's GET)
    if origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower():
        return f"Origin {origin!r} is not this server"
    return None


def local_path(target: str | None) -> str:
    """Where a login may send the browser back to: a path on this server ("/items/5",
    "/?all=1"), never another host — "//host", "/\\host" (a slash to browsers) and absolute URLs
    fall back to the inbox, "/"."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in target):
        return "/"  # a browser drops tabs and newlines: "/\t/host" would become "//host"
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else "/"
