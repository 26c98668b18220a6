"""Notifications against real local servers: a webhook receiver that verifies Standard Webhooks
signatures, an ntfy-shaped receiver, an in-process SMTP server with STARTTLS and login (aiosmtpd);
reminders on a manual clock, quiet hours, retries with backoff, and a receiver that is down across a
SIGKILL of a real `agentd serve` (every notification arrives once it returns, none twice)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.cli import doctor
from agentd.cli import status as status_cmd
from agentd.clock import ManualClock
from agentd.db import items as qi
from agentd.db import outbox
from agentd.db import queries as q
from agentd.db.store import Store, SyncStore
from agentd.errors import ConfigError
from agentd.models import InboxKind, InboxStatus
from agentd.notify.sender import Sender
from agentd.notify.webhook import sign
from agentd.runs.deps import Deps
from agentd.views.records import status_view
from tests.conftest import Home, closed_port
from tests.runs.test_crash import start_daemon, wait_ready

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()  # outside the default quiet hours
HOUR = 3600.0


# ── receivers ────────────────────────────────────────────────────────────────────────────────────


class Receiver:
    """A loopback HTTP server recording each POST (headers, JSON body, signature verdict)."""

    def __init__(self, port: int = 0, status: int = 200) -> None:
        self.got: list[dict[str, Any]] = []
        self.status = status
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.got.append({"headers": headers, "raw": body, "json": json.loads(body),
                                  "path": self.path, "valid": verify(headers, body)})  # fmt: skip
                self.send_response(outer.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def verify(headers: dict[str, str], body: bytes) -> bool:
    """A receiver's check, written from the Standard Webhooks spec (not from our signer)."""
    if "webhook-signature" not in headers:
        return False
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    fresh = abs(time.time() - int(headers["webhook-timestamp"])) < 300
    offered = [s.split(",", 1)[1] for s in headers["webhook-signature"].split() if "," in s]
    return fresh and any(hmac.compare_digest(expected, s) for s in offered)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def config_text(url: str, *, agent: str = "", extra: str = "") -> str:
    return textwrap.dedent(f"""
        [models.default]
        provider = "template"

        [notify.ops]
        type = "webhook"
        url = "{url}/hook"
        secret_env = "AGENTD_TEST_WHSEC"
        retry_base_s = 60
        retry_max_s = 600

        [agents.default]
        actions = ["finish"]
        checkin = {{ quiet = "none" }}

        [agents.default.notify]
        channels = ["ops"]
        on = ["approval", "question", "nudge", "notice", "failure"]
        {agent}
        """) + textwrap.dedent(extra)


class Rig:
    """A migrated home, the daemon's store and a Sender on a manual clock: tick() is one pass."""

    def __init__(self, home: Home, store: Store, clock: ManualClock, cfg: config.Config) -> None:
        self.home, self.store, self.clock = home, store, clock
        self.sender = Sender(
            Deps(
                config=cfg,
                store=store,
                models={},
                executors={},
                sources={},
                owner="test",
                clock=clock,
            )
        )
        self.goal_id = home.add_goal()

    async def settle(self) -> None:
        for _ in range(5):  # plan, then send what is due (and nothing is left due)
            await self.sender.tick()

    def post(self, kind: InboxKind = InboxKind.APPROVAL, **kw: Any) -> int:
        kw.setdefault("title", f"{kind} please")
        return self.home.store.write(lambda c: qi.post(c, kind, goal_id=self.goal_id, **kw))

    def health(self) -> dict[str, Any]:
        return self.home.store.read(outbox.channel_health)


@pytest.fixture
async def rig(home: Home, monkeypatch: pytest.MonkeyPatch, receiver: Receiver) -> Any:
    monkeypatch.setenv("AGENTD_TEST_WHSEC", SECRET)
    made: list[Store] = []

    async def make(text: str | None = None) -> Rig:
        cfg = home.write_config(text or config_text(receiver.url))
        home.store  # noqa: B018  # migrates
        store = Store(home.paths.db)
        await store.open()
        made.append(store)
        return Rig(home, store, ManualClock(NOON), cfg)

    yield make
    for s in made:
        await s.close()


# ── signing and config ───────────────────────────────────────────────────────────────────────────


def test_webhook_sign_matches_the_standard_webhooks_vector() -> None:
    body = b'{"test": 2432232314}'
    signature = sign(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_notify_config_refuses_unknown_channel_and_bad_durations(home: Home) -> None:
    with pytest.raises(ConfigError, match=r"names channel 'pager'"):
        home.write_config(config_text("http://127.0.0.1:1", agent='escalate_to = "pager"\n'
                                      'escalate_after = "1d"'))  # fmt: skip
    with pytest.raises(ConfigError, match="duration"):
        home.write_config(config_text("http://127.0.0.1:1", agent='remind_after = ["soon"]'))
    with pytest.raises(ConfigError, match="escalate_after"):
        home.write_config(config_text("http://127.0.0.1:1", agent='escalate_to = "ops"'))
    cfg = home.write_config(config_text("http://127.0.0.1:1", agent='remind_after = [90, "1h"]'))
    assert cfg.agents["default"].notify.remind_after == [90.0, 3600.0]


# ── channels against real servers ────────────────────────────────────────────────────────────────


async def test_notify_webhook_is_signed_and_carries_no_secret(rig: Any, receiver: Receiver) -> None:
    r = await rig()
    item_id = r.post(InboxKind.APPROVAL, title="roll back checkout", action="rollback",
                     args={"to": "v41", "token": "s3cr3t-arg"})  # fmt: skip
    await r.settle()
    assert len(receiver.got) == 1
    got = receiver.got[0]
    assert got["valid"], got["headers"]
    assert got["path"] == "/hook"
    data = got["json"]["data"]
    assert data["item_id"] == item_id and data["category"] == "approval"
    assert data["priority"] == "high" and data["url"] is None  # no [api] port: no link
    assert b"s3cr3t-arg" not in got["raw"] and b"token" not in got["raw"]
    assert r.health()["ops"]["failing"] is False


async def test_notify_ntfy_has_title_priority_tags_and_click_url(rig: Any, home: Home) -> None:
    ntfy = Receiver()
    try:
        text = config_text("http://127.0.0.1:1") + textwrap.dedent(f"""
            [api]
            port = 8799

            [web]
            enabled = true

            [notify.phone]
            type = "ntfy"
            url = "{ntfy.url}"
            topic = "agentd-ops"
            """)
        text = text.replace('channels = ["ops"]', 'channels = ["phone"]')
        r = await rig(text)
        item_id = r.post(InboxKind.QUESTION, title="which region?")
        await r.settle()
        assert len(ntfy.got) == 1
        push = ntfy.got[0]["json"]
        assert ntfy.got[0]["path"] == "/"
        assert push["topic"] == "agentd-ops" and "which region?" in push["title"]
        assert push["priority"] == 3 and "agentd" in push["tags"] and "question" in push["tags"]
        assert push["click"] == f"http://127.0.0.1:8799/items/{item_id}"  # the web inbox's page
    finally:
        ntfy.close()


def _tls_files(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make the SMTP server's certificate")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_notify_email_over_starttls_with_login(
    rig: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    cert, key = _tls_files(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    mails: list[Any] = []
    logins: list[tuple[bytes, bytes]] = []

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            mails.append((session.ssl is not None, envelope))
            return "250 OK"

    def auth(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        logins.append((data.login, data.password))
        return AuthResult(success=data.password == b"hunter2")

    port = closed_port()
    smtp = Controller(Handler(), hostname="127.0.0.1", port=port, tls_context=tls,
                      require_starttls=True, authenticator=auth, auth_require_tls=True)  # fmt: skip
    smtp.start()
    monkeypatch.setenv("AGENTD_TEST_SMTP_PASSWORD", "hunter2")
    try:
        text = config_text("http://127.0.0.1:1") + textwrap.dedent(f"""
            [notify.mail]
            type = "email"
            host = "127.0.0.1"
            port = {port}
            from = "agentd@example.test"
            to = ["ops@example.test"]
            username = "agentd"
            password_env = "AGENTD_TEST_SMTP_PASSWORD"
            ca_file = "{cert}"
            """)
        r = await rig(text.replace('channels = ["ops"]', 'channels = ["mail"]'))
        item_id = r.post(InboxKind.APPROVAL, title="approve restart_api?", action="restart_api")
        await r.settle()
    finally:
        smtp.stop()
    assert logins == [(b"agentd", b"hunter2")]
    assert len(mails) == 1
    tls_used, envelope = mails[0]
    assert tls_used and envelope.rcpt_tos == ["ops@example.test"]
    content = envelope.content.decode()
    assert f"(item {item_id}): approve restart_api?" in content and "hunter2" not in content


# ── which items, reminders, quiet hours, retries ─────────────────────────────────────────────────


async def test_notify_only_configured_categories(rig: Any, receiver: Receiver) -> None:
    r = await rig(config_text(receiver.url).replace(
        'on = ["approval", "question", "nudge", "notice", "failure"]', 'on = ["failure"]'))  # fmt: skip
    run_id = r.home.store.write(
        lambda c: q.create_run(c, goal_id=r.goal_id, agent="default", trigger="test")
    )
    r.post(InboxKind.APPROVAL)
    r.post(InboxKind.NOTICE, title=f"run {run_id} succeeded: fine", run_id=run_id)
    r.home.store.write(lambda c: c.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?",
                                           (run_id,)))  # fmt: skip
    failed = r.post(InboxKind.NOTICE, title=f"run {run_id} failed: boom", run_id=run_id)
    await r.settle()
    assert [g["json"]["data"]["item_id"] for g in receiver.got] == [failed]
    assert receiver.got[0]["json"]["data"]["category"] == "failure"


async def test_notify_backlog_bigger_than_a_batch_is_planned_at_once(
    rig: Any, receiver: Receiver
) -> None:
    """500 notices nobody asked to hear of, then an approval (a restore, a bulk import): the
    sender plans batch after batch without its idle pause between them, so the approval's message
    goes out within a few passes, not after 500/200 idle pauses."""
    r = await rig(config_text(receiver.url).replace('on = ["approval", "question", "nudge", '
                                                    '"notice", "failure"]', 'on = ["approval"]'))  # fmt: skip

    def post_many(c: Any) -> None:
        for n in range(500):
            qi.post(c, InboxKind.NOTICE, goal_id=r.goal_id, title=f"notice {n}")

    r.home.store.write(post_many)
    approval = r.post(InboxKind.APPROVAL)
    waits = [await r.sender.tick() for _ in range(4)]
    assert waits[:2] == [0.0, 0.0]  # more queued after a batch: straight on
    assert not r.home.store.read(outbox.has_queued)
    assert [g["json"]["data"]["item_id"] for g in receiver.got] == [approval]


async def test_notify_without_channels_drops_the_queue_in_one_pass(rig: Any, home: Home) -> None:
    """No agent notifies anywhere: the queue filled by the inbox trigger is emptied in one pass
    (an idle daemon with thousands of open items must not plan nothing every few seconds)."""
    r = await rig(
        '[models.default]\nprovider = "template"\n\n[agents.default]\nactions = ["finish"]\n'
    )

    def post_many(c: Any) -> None:
        for n in range(450):
            qi.post(c, InboxKind.QUESTION, goal_id=r.goal_id, title=f"question {n}")

    r.home.store.write(post_many)
    assert r.home.store.read(outbox.has_queued)
    assert await r.sender.tick() == 5.0  # one pass, then the idle pause
    assert not r.home.store.read(outbox.has_queued)


async def test_notify_reminders_fire_on_schedule_and_stop_when_answered(
    rig: Any, receiver: Receiver
) -> None:
    pager = Receiver()
    try:
        text = config_text(receiver.url, agent=textwrap.dedent("""
            remind_after = ["1h", "4h"]
            escalate_after = "24h"
            escalate_to = "pager"
            """)) + f'\n[notify.pager]\ntype = "webhook"\nurl = "{pager.url}"\n'  # fmt: skip
        r = await rig(text)
        answered = r.post(InboxKind.QUESTION, title="first")
        ignored = r.post(InboxKind.QUESTION, title="second")
        await r.settle()
        # Sorted per pass: the messages due together are sent concurrently.
        stages = lambda rec: [(g["json"]["data"]["item_id"], g["json"]["data"]["stage"])  # noqa: E731
                              for g in rec.got]  # fmt: skip
        assert sorted(stages(receiver)) == [(answered, 0), (ignored, 0)]
        r.clock.advance(HOUR - 1)
        await r.settle()
        assert len(receiver.got) == 2  # not before its time
        r.clock.advance(1)
        await r.settle()
        assert sorted(stages(receiver)[2:]) == [(answered, 1), (ignored, 1)]
        assert "reminder 1" in receiver.got[2]["json"]["subject"]
        r.home.store.write(
            lambda c: qi.resolve(c, answered, InboxStatus.ANSWERED, answer="eu-west")
        )
        r.clock.advance(3 * HOUR)
        await r.settle()
        assert stages(receiver)[4:] == [(ignored, 2)]
        r.clock.advance(20 * HOUR)
        await r.settle()
        assert stages(pager) == [(ignored, 3)]  # the escalation, to the second channel only
        assert pager.got[0]["json"]["data"]["priority"] == "urgent"
        r.clock.advance(30 * 86400)
        await r.settle()
        assert len(receiver.got) == 5 and len(pager.got) == 1  # nothing more, nothing twice
        ids = [g["headers"]["webhook-id"] for g in receiver.got + pager.got]
        assert len(set(ids)) == len(ids)
    finally:
        pager.close()


async def test_notify_retries_with_backoff_and_shows_a_failing_channel(
    rig: Any, home: Home
) -> None:
    port = closed_port()
    r = await rig(config_text(f"http://127.0.0.1:{port}"))
    item_id = r.post(InboxKind.APPROVAL, title="deploy?")
    await r.settle()
    health = r.health()["ops"]
    assert health["failing"] and health["pending"] == 1 and "127.0.0.1" in health["error"]
    report = doctor.examine(home.paths, None)
    check = next(c for c in report.checks if c.name == "notify ops")
    assert not check.ok and "failing" in check.message
    data = home.store.read(lambda c: status_cmd.gather(c, time.time()))
    assert data["notify"]["ops"]["failing"]
    assert "ops failing" in status_view({"home": "h", "daemon": {"up": False, "pid": None},
                                         **data}, datetime.now(UTC))  # fmt: skip
    attempts = lambda: home.store.read(  # noqa: E731
        lambda c: c.execute("SELECT attempts, next_attempt_at FROM outbox").fetchone()
    )
    assert attempts()[0] == 1 and attempts()[1] == NOON + 60  # retry_base_s
    r.clock.advance(60)
    await r.settle()
    assert attempts()[0] == 2 and attempts()[1] == NOON + 60 + 120  # doubled
    back = Receiver(port)
    try:
        r.clock.advance(120)
        await r.settle()
        assert [g["json"]["data"]["item_id"] for g in back.got] == [item_id]
        assert r.health()["ops"]["failing"] is False
    finally:
        back.close()


# ── across a SIGKILL of a real daemon ────────────────────────────────────────────────────────────


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_notify_receiver_down_gets_everything_after_a_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = closed_port()
    text = config_text(f"http://127.0.0.1:{port}").replace(
        "retry_base_s = 60\nretry_max_s = 600", "retry_base_s = 0.2\nretry_max_s = 0.5")  # fmt: skip
    (home / "config.toml").write_text(text)
    monkeypatch.setenv("AGENTD_TEST_WHSEC", SECRET)  # the daemon inherits it
    store = SyncStore(config.Paths(home).db)
    try:
        goal_id = store.write(lambda c: q.add_goal(c, title="g", why="t", agent="default",
                                                   criteria=[], deadline=None))  # fmt: skip
        proc = start_daemon(home)
        wait_ready(home, 1)
        posted = [
            store.write(
                lambda c, n=n: qi.post(c, InboxKind.QUESTION, title=f"q{n}", goal_id=goal_id)
            )
            for n in range(6)
        ]
        deadline = time.monotonic() + 20  # every message tried and failed at least once
        while store.read(lambda c: c.execute(
                "SELECT count(*) FROM outbox WHERE attempts > 0").fetchone()[0]) < 6:  # fmt: skip
            assert time.monotonic() < deadline, (home / "daemon.log").read_text()[-2000:]
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        posted.append(store.write(lambda c: qi.post(c, InboxKind.APPROVAL, title="while down",
                                                    goal_id=goal_id)))  # fmt: skip
        back = Receiver(port)
        try:
            proc = start_daemon(home)
            wait_ready(home, 2)
            deadline = time.monotonic() + 20
            while len(back.got) < len(posted) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # anything extra would arrive now
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        finally:
            back.close()
    finally:
        store.close()
    assert sorted(g["json"]["data"]["item_id"] for g in back.got) == sorted(posted)
    assert all(g["valid"] for g in back.got)
    ids = [g["headers"]["webhook-id"] for g in back.got]
    assert len(set(ids)) == len(ids)


def test_notify_readme_example_is_a_valid_config(home: Home) -> None:
    part = (Path(__file__).resolve().parents[2] / "docs" / "notifications.md").read_text()
    toml = part.split("```toml\n", 1)[1].split("```", 1)[0]
    cfg = home.write_config('[models.default]\nprovider = "template"\n\n[agents.default]\n'
                            'actions = ["finish"]\n\n' + toml)  # fmt: skip
    rules = cfg.agents["default"].notify
    assert rules.remind_after == [3600.0, 4 * 3600.0, 24 * 3600.0]
    assert rules.escalate_to == ["mail"] and set(cfg.notify) == {"ops", "phone", "mail"}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_notify_reminders_on_a_scaled_daemon_clock_stop_when_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    """`agentd serve --clock-speed 3600`: a simulated hour per second, reminders at 2 h and 24 h.
    The item answered between them must be answered before its 24 h reminder is due: 22 s of wall
    time, a window no load closes (at 6 h, 4 s, a loaded machine missed it). The waits are
    bounded generously: the pace of a loaded machine is not what is tested."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        config_text(receiver.url, agent='remind_after = ["2h", "24h"]')
    )
    monkeypatch.setenv("AGENTD_TEST_WHSEC", SECRET)
    store = SyncStore(config.Paths(home).db)
    env = {**os.environ, "AGENTD_LOG_FORMAT": "json"}
    with (home / "daemon.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentd", "--home", str(home), "serve", "--clock-speed", "3600"],
            stdout=log, stderr=log, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        wait_ready(home, 1)
        goal_id = store.write(lambda c: q.add_goal(c, title="g", why="t", agent="default",
                                                   criteria=[], deadline=None))  # fmt: skip
        answered = store.write(lambda c: qi.post(c, InboxKind.APPROVAL, title="a", goal_id=goal_id))
        ignored = store.write(lambda c: qi.post(c, InboxKind.APPROVAL, title="b", goal_id=goal_id))

        def stages() -> set[tuple[int, int]]:
            return {
                (g["json"]["data"]["item_id"], g["json"]["data"]["stage"]) for g in receiver.got
            }

        deadline = time.monotonic() + 150
        while {(answered, 1), (ignored, 1)} - stages():  # the 2 h reminders, ~2 s in
            assert time.monotonic() < deadline, (
                stages(),
                (home / "daemon.log").read_text()[-2000:],
            )
            time.sleep(0.05)
        store.write(lambda c: qi.resolve(c, answered, InboxStatus.APPROVED))
        while (ignored, 2) not in stages():  # the 24 h reminder, ~22 s later
            assert time.monotonic() < deadline, stages()
            time.sleep(0.05)
        time.sleep(1.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
        store.close()
    assert stages() == {(answered, 0), (ignored, 0), (answered, 1), (ignored, 1), (ignored, 2)}
    assert len(receiver.got) == 5  # none twice
