"""A throw-away Dovecot IMAP server for the mail tests and benches (no pytest here: bench/ uses it).

Debian's `dovecot` (package dovecot-imapd) run in the foreground (`dovecot -F -c CONF`) from a temp
dir holding its config, a passwd-file with one test user, that user's Maildir, and its sockets; it
listens on a free loopback port, without TLS. Mail arrives the way a server receives it: through
`dovecot-lda` (local delivery, what an MTA runs) or IMAP APPEND from another client.

A dir records the pid of the process that made it (`owner.pid`); starting a server first stops and
removes any `agentd-dovecot-*` server beside it whose owner is gone (a run killed before its
teardown), as tests/pg_cluster.py does for PostgreSQL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests import servers

USER = "mailtest"
PASSWORD = "test-password-1"
LDA = Path("/usr/lib/dovecot/dovecot-lda")
PREFIX = "agentd-dovecot-"
# Users `mailtest1` … known from the start: a test session sharing one server gives each test
# its own (tests/dovecot.py) without waiting for the server to re-read its passwd-file.
SPARE_USERS = 500
INSTALL_HINT = "install it with `bash .ci/install-dovecot` as root (apt-get install dovecot-imapd)"

CONFIG = """\
base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.log
info_log_path = {dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
{ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{dir}/mail/%u/Maildir
mail_uid = {uid}
mail_gid = {gid}
default_internal_user = {internal}
default_internal_group = {internal_group}
default_login_user = {login}
mail_max_userip_connections = 100
mailbox_idle_check_interval = 1 secs
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={dir}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
namespace inbox {{
  inbox = yes
  mailbox Drafts {{
    special_use = \\Drafts
    auto = create
  }}
  mailbox Sent {{
    special_use = \\Sent
    auto = create
  }}
  mailbox Archive {{
    auto = create
  }}
}}
{extra}
"""


def missing_reason() -> str | None:
    """Why the Dovecot tests cannot run here, or None."""
    if shutil.which("dovecot") is None and not Path("/usr/sbin/dovecot").is_file():
        return f"DOVECOT TEST SKIPPED: Debian's dovecot-imapd is not installed; {INSTALL_HINT}"
    return None


def _accounts() -> dict[str, object]:
    """Who runs what. Dovecot refuses root for its login processes and its mail users, so as
    root (CI) it uses Debian's `dovecot` / `dovenull` accounts and the mail belongs to `nobody`;
    as anyone else everything runs as that user."""
    import grp
    import pwd

    if os.getuid() != 0:
        me = pwd.getpwuid(os.getuid())
        group = grp.getgrgid(os.getgid()).gr_name
        return {"uid": me.pw_uid, "gid": me.pw_gid, "internal": me.pw_name,
                "internal_group": group, "login": me.pw_name}  # fmt: skip
    nobody = pwd.getpwnam("nobody")
    return {"uid": nobody.pw_uid, "gid": nobody.pw_gid, "internal": "dovecot",
            "internal_group": "dovecot", "login": "dovenull"}  # fmt: skip


def _certificate(d: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is not installed: cannot make the IMAP server's certificate")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


@dataclass
class Dovecot:
    dir: Path
    port: int
    process: subprocess.Popen[bytes]
    conf: Path
    imaps_port: int = 0  # implicit TLS, when started with tls=True (STARTTLS is on `port` then)
    user: str = USER  # the mail user this handle logs in as, delivers to and fills

    host = "127.0.0.1"
    password = PASSWORD  # every user's

    @classmethod
    def start(cls, *, idle: bool = True, tls: bool = False) -> Dovecot:
        """With `tls`, a self-signed certificate for 127.0.0.1 (`cert.pem` in the dir, the CA a
        client trusts), STARTTLS offered on `port` and implicit TLS on `imaps_port`."""
        parent = Path(tempfile.gettempdir())
        sweep_orphans(parent)
        d = servers.make_dir(PREFIX, parent)
        port = servers.free_port()
        ids = _accounts()
        # Without IDLE in the capabilities a client must fall back to polling.
        extra = "" if idle else "imap_capability = IMAP4rev1 LITERAL+ UIDPLUS MOVE"
        conf = d / "dovecot.conf"
        ssl, imaps = "ssl = no", 0
        if tls:
            imaps = servers.free_port()
            _certificate(d)
            ssl = f"ssl = yes\nssl_cert = <{d}/cert.pem\nssl_key = <{d}/key.pem"
        conf.write_text(
            CONFIG.format(dir=d, port=port, extra=extra, ssl=ssl, imaps_port=imaps, **ids)  # type: ignore[arg-type]
        )
        users = [USER] + [f"{USER}{n}" for n in range(1, SPARE_USERS + 1)]
        (d / "passwd").write_text("\n" + "".join(_passwd_line(u) for u in users))
        for sub in ("run", "state", "mail"):
            (d / sub).mkdir()
        os.chown(d / "mail", int(ids["uid"]), int(ids["gid"]))
        d.chmod(0o755)  # the mail user (nobody, as root) reaches its Maildir below
        dovecot = shutil.which("dovecot") or "/usr/sbin/dovecot"
        with (d / "stdout.log").open("wb") as log:
            proc = subprocess.Popen([dovecot, "-F", "-c", str(conf)], stdout=log, stderr=log)
        (d / "dovecot.pid").write_text(str(proc.pid))  # -F: this process is the master
        server = cls(d, port, proc, conf, imaps)
        server._wait_listening()
        return server

    def _wait_listening(self, within_s: float = 60.0) -> None:
        servers.wait_until(
            lambda: servers.listening(self.port), f"dovecot on port {self.port}",
            process=self.process, log=self.log, within_s=within_s,
        )  # fmt: skip

    def with_user(self, name: str) -> Dovecot:
        """A handle on this server for the mail user `name` (same password, a Maildir of its
        own): a test's own mailboxes on a server its session shares. A name the server was not
        started with is added, and waited for until the server knows it (it re-reads its
        passwd-file at most once a second)."""
        passwd = self.dir / "passwd"
        if not passwd.read_text().count(f"\n{name}:"):
            tmp = self.dir / "passwd.tmp"  # written whole and renamed: never read half-written
            tmp.write_text(passwd.read_text() + _passwd_line(name))
            tmp.replace(passwd)
            servers.wait_until(
                lambda: self._knows(name), f"dovecot's user {name}", process=self.process,
                log=self.log, within_s=30,
            )  # fmt: skip
        return dataclasses.replace(self, user=name)

    def _knows(self, name: str) -> bool:
        argv = ["doveadm", "-c", str(self.conf), "user", name]
        return subprocess.run(argv, capture_output=True, timeout=60, check=False).returncode == 0

    def log(self) -> str:
        parts = [
            p.read_text(errors="replace")
            for p in (self.dir / "dovecot.log", self.dir / "stdout.log")
            if p.exists()
        ]
        return "\n".join(parts)

    def deliver(self, raw: bytes, mailbox: str = "INBOX") -> None:
        """Deliver one message as an MTA would: dovecot-lda reads it on stdin."""
        argv = [str(LDA), "-c", str(self.conf), "-d", self.user, "-m", mailbox]
        done = subprocess.run(argv, input=raw, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"dovecot-lda failed ({done.returncode}): {done.stderr!r}")

    def fill(self, count: int) -> None:
        """Put `count` small messages straight into the INBOX Maildir's new/ (what an MTA's
        Maildir delivery does, without a process per message: for benches of big mailboxes)."""
        box = self.dir / "mail" / self.user / "Maildir"
        owner = _accounts()
        for sub in ("", "new", "cur", "tmp"):
            (box / sub).mkdir(parents=True, exist_ok=True)
            os.chown(box / sub, int(owner["uid"]), int(owner["gid"]))  # type: ignore[call-overload]
        os.chown(box.parent, int(owner["uid"]), int(owner["gid"]))  # type: ignore[call-overload]
        stamp = int(time.time())
        for i in range(count):
            path = box / "new" / f"{stamp}.M{i}P{os.getpid()}.agentd-bench"
            path.write_bytes(
                message(f"bulk {i}", f"Message number {i}.", message_id=f"<bulk-{i}@example.com>")
            )
            os.chown(path, int(owner["uid"]), int(owner["gid"]))  # type: ignore[call-overload]

    def doveadm(self, *args: str) -> str:
        argv = ["doveadm", "-c", str(self.conf), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout

    def stop(self) -> None:
        servers.stop_process(self.process)
        shutil.rmtree(self.dir, ignore_errors=True)


def _passwd_line(user: str) -> str:
    return f"{user}:{{PLAIN}}{PASSWORD}::::::\n"


def sweep_orphans(parent: Path) -> None:
    """Stop and remove the servers under `parent` whose test run or bench died before its teardown
    (its dovecot master, `dovecot.pid`, is stopped only if it still runs this dir's config)."""

    def stop(root: Path) -> None:
        with contextlib.suppress(OSError, ValueError):
            master = int((root / "dovecot.pid").read_text())
            cmdline = Path(f"/proc/{master}/cmdline").read_bytes()
            if str(root / "dovecot.conf").encode() in cmdline:
                servers.stop_pid(master)
        shutil.rmtree(root, ignore_errors=True)

    servers.sweep_orphans(parent, PREFIX, stop)


_alive = servers.alive  # the old names
_free_port = servers.free_port


def message(
    subject: str,
    body: str = "Hello.",
    *,
    sender: str = "alice@example.com",
    to: str = f"{USER}@example.com",
    message_id: str | None = None,
) -> bytes:
    """A plain RFC 5322 message."""
    mid = (
        message_id
        if message_id is not None
        else f"<{subject.replace(' ', '-')}-{time.monotonic_ns()}@example.com>"
    )
    return (
        f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n"
        + (f"Message-ID: {mid}\r\n" if mid else "")
        + f"Date: Mon, 07 Dec 2026 03:00:00 +0000\r\nMIME-Version: 1.0\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()
