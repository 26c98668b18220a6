"""Mail: how fast a new message becomes an event, how fast a big mailbox is ingested, and what an
open IDLE connection costs an idle daemon.

    bench/mail.py latency --samples 30 --workdir DIR
    bench/mail.py ingest --messages 10000 --workdir DIR
    bench/mail.py idle --seconds 60 --workdir DIR

Each mode starts a throw-away Dovecot (tests/dovecot_server.py: Debian's dovecot-imapd, a loopback
port, plain IMAP) and one real daemon (`agentd serve`, JSON logs) on a fresh home whose agent has
the imap source `inbox`; it prints `SKIPPED: …` (exit 0) where Dovecot is missing.

`latency`: one message at a time delivered by `dovecot-lda` (as an MTA does); latency = the event's
`created_at` (the commit's clock) − the wall time `dovecot-lda` returned (the mail is on the
server). IDLE on; median and p99. `ingest`: `--messages` small messages put in the Maildir before
the daemon's first connection, with `announce_existing = true`; messages per second from the
daemon's start to the last event's commit, and the daemon's peak RSS (VmHWM) beside a daemon on
an empty mailbox. `idle`: the daemon's CPU (utime + stime of all its threads, /proc/PID/stat) over
`--seconds` with its IDLE connection open and nothing arriving.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.db import items as qi
from agentd.db.store import SyncStore
from tests.dovecot_server import Dovecot, message, missing_reason

PASSWORD_ENV = "AGENTD_BENCH_IMAP_PASSWORD"  # noqa: S105 (a variable's name)
TICK = os.sysconf("SC_CLK_TCK")


def result(**fields: Any) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


class Daemon:
    def __init__(self, home: Path, server: Dovecot, *, announce_existing: bool = False) -> None:
        self.home = home
        home.mkdir(parents=True)
        finish = {
            "reason": "ok",
            "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"},
        }
        (home / "replies.json").write_text(json.dumps([finish]))
        (home / "config.toml").write_text(
            '[models.default]\nprovider = "scripted"\nreplies = "replies.json"\n\n'
            f'[sources.inbox]\ntype = "imap"\nhost = "{server.host}"\nport = {server.port}\n'
            f'tls = "none"\nuser = "{server.user}"\npassword_env = "{PASSWORD_ENV}"\n'
            f"announce_existing = {str(announce_existing).lower()}\n\n"
            '[agents.default]\nactions = ["finish"]\nsources = ["inbox"]\n'
        )
        env = {**os.environ, "AGENTD_LOG_FORMAT": "json", PASSWORD_ENV: server.password}
        self.log = home / "daemon.log"
        self.started = time.time()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentd", "--home", str(home), "serve"],
                stdout=out, stderr=out, env=env, start_new_session=True,
            )  # fmt: skip
        self.wait_for('"imap.connected"')
        self.store = SyncStore(home / "agentd.db")

    def wait_for(self, text: str, within_s: float = 120.0) -> None:
        deadline = time.monotonic() + within_s
        while text not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"daemon: no {text}:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.01)

    def events(self) -> list[Any]:
        out: list[Any] = []
        after = 0
        while batch := self.store.read(lambda c, a=after: qi.events_after(c, a, limit=5000)):
            out += [e for e in batch if e.name == "inbox.received"]
            after = batch[-1].event_id
        return out

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.store.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def cursor_set(d: Daemon) -> bool:
    sql = "SELECT 1 FROM meta WHERE key = 'imap_cursor:inbox'"
    return d.store.read(lambda c: c.execute(sql).fetchone()) is not None


def latency(work: Path, samples: int) -> None:
    server = Dovecot.start()
    try:
        d = Daemon(work / "home", server)
    except BaseException:
        server.stop()  # a daemon that did not start leaves no Dovecot behind
        raise
    try:
        while not cursor_set(d):
            time.sleep(0.01)
        figures: list[float] = []
        for i in range(samples):
            before = len(d.events())
            server.deliver(message(f"sample {i}"))
            delivered = time.time()
            while len(events := d.events()) == before:
                time.sleep(0.002)
            ms = (events[-1].created_at.timestamp() - delivered) * 1000
            figures.append(ms)
            result(mode="latency", sample=i, ms=round(ms, 1))
            time.sleep(0.2)  # the next mail arrives while the daemon idles again
        print(f"SUMMARY mode=latency samples={samples} median_ms={statistics.median(figures):.1f} "
              f"p99_ms={percentile(figures, 99):.1f} max_ms={max(figures):.1f}", flush=True)  # fmt: skip
    finally:
        d.stop()
        server.stop()


def ingest(work: Path, count: int) -> None:
    empty_server = Dovecot.start()
    base = Daemon(work / "empty", empty_server, announce_existing=True)
    time.sleep(2)
    base_rss = base.peak_rss_mb()
    base.stop()
    empty_server.stop()
    server = Dovecot.start()
    server.fill(count)
    d = Daemon(work / "home", server, announce_existing=True)
    try:
        deadline = time.monotonic() + 1800
        while len(events := d.events()) < count and time.monotonic() < deadline:
            time.sleep(0.5)
        took = events[-1].created_at.timestamp() - d.started
        rate = len(events) / took
        rss = d.peak_rss_mb()
        result(mode="ingest", messages=len(events), seconds=round(took, 2), per_s=round(rate, 1),
               peak_rss_mb=round(rss, 1), empty_mailbox_peak_rss_mb=round(base_rss, 1))  # fmt: skip
        print(f"SUMMARY mode=ingest messages={len(events)} per_s={rate:.0f} seconds={took:.1f} "
              f"peak_rss_mb={rss:.0f} (empty mailbox: {base_rss:.0f})", flush=True)  # fmt: skip
    finally:
        d.stop()
        server.stop()


def idle(work: Path, seconds: float) -> None:
    server = Dovecot.start()
    try:
        d = Daemon(work / "home", server)
    except BaseException:
        server.stop()
        raise
    try:
        time.sleep(5)  # settle: migrations, first looks
        start_cpu, start = d.cpu_s(), time.monotonic()
        time.sleep(seconds)
        used, wall = d.cpu_s() - start_cpu, time.monotonic() - start
        pct = used / wall * 100
        result(mode="idle", seconds=round(wall, 1), cpu_s=round(used, 3), pct_of_core=round(pct, 3))
        print(f"SUMMARY mode=idle cpu_pct_of_core={pct:.3f} over {wall:.0f}s with IDLE open",
              flush=True)  # fmt: skip
    finally:
        d.stop()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["latency", "ingest", "idle"])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--messages", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workdir", type=Path, default=Path(".bench"))
    args = parser.parse_args()
    if (why := missing_reason()) is not None:
        print(f"SKIPPED: {why}")
        return
    work = args.workdir.resolve() / f"mail-{args.mode}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.mode == "latency":
        latency(work, args.samples)
    elif args.mode == "ingest":
        ingest(work, args.messages)
    else:
        idle(work, args.seconds)


if __name__ == "__main__":
    main()
