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
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

USER = "mailtest"
PASSWORD = "test-password-1"
LDA = Path("/usr/lib/dovecot/dovecot-lda")
PREFIX = "agentd-dovecot-"
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Dovecot:
    dir: Path
    port: int
    process: subprocess.Popen[bytes]
    conf: Path
    imaps_port: int = 0  # implicit TLS, when started with tls=True (STARTTLS is on `port` then)

    host = "127.0.0.1"
    user = USER
    password = PASSWORD

    @classmethod
    def start(cls, *, idle: bool = True, tls: bool = False) -> Dovecot:
        """With `tls`, a self-signed certificate for 127.0.0.1 (`cert.pem` in the dir, the CA a
        client trusts), STARTTLS offered on `port` and implicit TLS on `imaps_port`."""
        parent = Path(tempfile.gettempdir())
        sweep_orphans(parent)
        d = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        (d / "owner.pid").write_text(str(os.getpid()))
        port = _free_port()
        ids = _accounts()
        # Without IDLE in the capabilities a client must fall back to polling.
        extra = "" if idle else "imap_capability = IMAP4rev1 LITERAL+ UIDPLUS MOVE"
        conf = d / "dovecot.conf"
        ssl, imaps = "ssl = no", 0
        if tls:
            imaps = _free_port()
            _certificate(d)
            ssl = f"ssl = yes\nssl_cert = <{d}/cert.pem\nssl_key = <{d}/key.pem"
        conf.write_text(
            CONFIG.format(dir=d, port=port, extra=extra, ssl=ssl, imaps_port=imaps, **ids)  # type: ignore[arg-type]
        )
        (d / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
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
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dovecot exited: {self.log()[-2000:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"dovecot did not listen on {self.port}: {self.log()[-2000:]}")

    def log(self) -> str:
        parts = [
            p.read_text(errors="replace")
            for p in (self.dir / "dovecot.log", self.dir / "stdout.log")
            if p.exists()
        ]
        return "\n".join(parts)

    def deliver(self, raw: bytes, mailbox: str = "INBOX") -> None:
        """Deliver one message as an MTA would: dovecot-lda reads it on stdin."""
        argv = [str(LDA), "-c", str(self.conf), "-d", USER, "-m", mailbox]
        done = subprocess.run(argv, input=raw, capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"dovecot-lda failed ({done.returncode}): {done.stderr!r}")

    def fill(self, count: int) -> None:
        """Put `count` small messages straight into the INBOX Maildir's new/ (what an MTA's
        Maildir delivery does, without a process per message: for benches of big mailboxes)."""
        box = self.dir / "mail" / USER / "Maildir"
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
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def sweep_orphans(parent: Path) -> None:
    """Stop and remove the servers under `parent` whose test run or bench died before its teardown
    (its dovecot master, `dovecot.pid`, is stopped only if it still runs this dir's config)."""
    for root in parent.glob(f"{PREFIX}*"):
        try:
            owner = int((root / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being made
        if _alive(owner):
            continue
        with contextlib.suppress(OSError, ValueError):
            master = int((root / "dovecot.pid").read_text())
            cmdline = Path(f"/proc/{master}/cmdline").read_bytes()
            if str(root / "dovecot.conf").encode() in cmdline:
                _stop_pid(master)
        shutil.rmtree(root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    with contextlib.suppress(OSError, IndexError):  # a zombie nobody reaped yet is gone too
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _stop_pid(pid: int, within_s: float = 20.0) -> None:
    """SIGTERM (dovecot's master stops its children), then SIGKILL if it is still there."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # our own child (a test of this): reap it
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


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
