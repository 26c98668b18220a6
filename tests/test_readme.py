"""The README's quickstart and the docs' first steps (docs/checkins.md's first check-in too, on a
fast clock), walked as written; every relative link resolves.

Every line of every ```sh block in those sections runs, in order, through bash with the venv's
`agentd` first on PATH and a fresh HOME (so `~/.local/share/agentd` is a new home, as on a new
machine); `agentd serve` starts a real daemon in the background, as another terminal would. The
own-service section's ```toml block becomes the config, with its two machine-specific values (the
service URL and the log path) pointed at a loopback service and a temp file. A command that fails,
or a README that drifts from what agentd does, fails here. Every ```toml block of README.md and
docs/*.md loads through agentd's config loader (alone, or added to the config it extends).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentd import config
from agentd.cli import app
from agentd.db import checkins as qc
from agentd.db import queries as q
from agentd.db import world as worlds
from agentd.db.store import SyncStore
from agentd.errors import ConfigError

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS = README.parent / "docs"
VENV_BIN = Path(sys.executable).parent  # the venv running these tests holds the `agentd` script
STEP_TIMEOUT_S = 20.0
BASH = shutil.which("bash") or "/bin/bash"  # the README's commands are bash (`$(…)`, `~`)


def section(text: str, heading: str) -> str:
    """The lines under `heading` up to the next heading of the same or a higher level (headings
    inside fenced blocks do not count)."""
    level = len(heading) - len(heading.lstrip("#"))
    out: list[str] = []
    inside, fenced = False, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and (m := re.match(r"^(#+) ", line)):
            if inside and len(m[1]) <= level:
                break
            inside = inside or line.strip() == heading
            continue
        if inside:
            out.append(line)
    assert out, f"README.md has no section {heading!r}"
    return "\n".join(out)


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def commands(text: str) -> list[str]:
    """Each shell command of the section's ```sh blocks (continuation lines joined)."""
    found: list[str] = []
    for block in blocks(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(line.strip())
    assert found, "no ```sh block in the section"
    return found


class Walk:
    """A fresh machine for one section: HOME, the venv's agentd on PATH, a daemon if asked."""

    def __init__(self, root: Path) -> None:
        self.home = root / "user"
        self.home.mkdir()
        self.agentd_home = self.home / ".local" / "share" / "agentd"
        self.log = root / "daemon.log"
        drop = ("AGENTD_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "NOTIFY_SOCKET")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env = {
            **env, "HOME": str(self.home), "PATH": f"{VENV_BIN}:{env.get('PATH', '')}",
            "AGENTD_LOG_FORMAT": "json", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "TMPDIR": str(root),  # a `mktemp -d` home stays in the test's folder
        }  # fmt: skip
        self.daemon: subprocess.Popen[bytes] | None = None
        self.ran: dict[str, subprocess.CompletedProcess[str]] = {}

    def run(self, line: str) -> None:
        if re.match(r"^agentd serve\b", line):
            self.serve(line)
            return
        if m := re.match(r"^export (\w+)=", line):  # the next commands see it, as in a shell
            self.export(line, m[1])
            return
        reloads = self.logged("config.reloaded")
        done = subprocess.run(
            [BASH, "-c", line], cwd=self.home, env=self.env, capture_output=True, text=True,
            timeout=STEP_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"README command failed: {line}\n{done.stdout}{done.stderr}"
        assert "Traceback" not in done.stderr, f"{line}\n{done.stderr}"
        self.ran[line] = done
        if re.match(r"^agentd reload\b", line):  # as a person would: the reload is seen next
            self.until(lambda: self.logged("config.reloaded") > reloads, f"a reload after {line}")

    def export(self, line: str, name: str) -> None:
        done = subprocess.run(
            [BASH, "-c", f'{line}\nprintf %s "${name}"'], cwd=self.home, env=self.env,
            capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=True,
        )  # fmt: skip
        self.env[name] = done.stdout
        if name == "AGENTD_HOME":
            self.agentd_home = Path(done.stdout)

    def serve(self, line: str) -> None:
        with self.log.open("ab") as out:
            self.daemon = subprocess.Popen(
                [BASH, "-c", f"exec {line}"], cwd=self.home, env=self.env, stdout=out,
                stderr=out, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        self.until(lambda: self.logged("daemon.ready") > 0, "the daemon to be ready")

    def logged(self, event: str) -> int:
        return self.log.read_text().count(f'"{event}"') if self.log.exists() else 0

    def until(self, ok: Callable[[], Any], what: str, timeout_s: float = STEP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not ok():
            if self.daemon is not None and self.daemon.poll() is not None:
                raise AssertionError(f"the daemon exited waiting for {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-20:]) if self.log.exists() else ""

    def stop(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            os.killpg(self.daemon.pid, signal.SIGTERM)
            try:
                self.daemon.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.daemon.pid, signal.SIGKILL)
                self.daemon.wait()

    def store(self) -> SyncStore:
        return SyncStore(self.agentd_home / "agentd.db")


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walk]:
    w = Walk(tmp_path)
    yield w
    w.stop()


def run_finished(walk: Walk, run_id: int) -> Callable[[], bool]:
    def check() -> bool:
        store = walk.store()
        try:
            return store.read(lambda c: q.get_run(c, run_id)).status.finished
        finally:
            store.close()

    return check


def test_readme_using_it_runs_as_written(walk: Walk) -> None:
    lines = commands(section((DOCS / "configuration.md").read_text(), "## First steps"))
    assert (VENV_BIN / "agentd").exists()
    for line in lines:
        walk.run(line)
        if re.match(r"^agentd runs start 1\b", line):  # a person reads the run before going on
            walk.until(run_finished(walk, 1), "run 1 to finish")

    store = walk.store()
    try:
        runs = sorted(store.read(lambda c: q.list_runs(c, limit=10)), key=lambda r: r.run_id)
    finally:
        store.close()
    assert [(r.run_id, r.goal_id) for r in runs] == [(1, 1), (2, 1)], runs
    assert runs[0].status == "succeeded"
    assert runs[1].trigger.startswith("event:alert"), runs[1].trigger
    sent = next(done for line, done in walk.ran.items() if "event send alert" in line)
    assert "warning" not in sent.stderr, sent.stderr  # the README's trigger took effect


def test_checkins_first_checkin_runs_as_written(walk: Walk) -> None:
    """docs/checkins.md's walkthrough on a fresh `agentd init` home at 3600× the wall: the look
    after the run asks the placeholder model, which answers; nothing fails on the way."""
    text = section((DOCS / "checkins.md").read_text(), "## A first check-in, step by step")
    lines = commands(text)
    assert any(re.match(r"^agentd serve --clock-speed \d+", line) for line in lines), lines
    for line in lines:
        if re.match(r"^agentd checkins\b", line):  # "a few seconds later": a look has decided
            walk.until(lambda: [r for r in looks(walk) if r.status == "done"], "a decided look")
        walk.run(line)

    (decided, *_) = [r for r in looks(walk) if r.status == "done"]
    assert decided.model and decided.decision and decided.tokens_in > 0, decided
    assert decided.decision["verdict"]["kind"] == "nothing", decided.decision
    assert decided.precheck["reasons"] == ["run 1 succeeded"], decided.precheck  # the run moved it
    assert not [r for r in looks(walk) if r.status == "failed"], looks(walk)
    shown = next(
        done.stdout for line, done in walk.ran.items() if line.startswith("agentd checkins")
    )
    assert re.search(r"\bdone\b.*scripted", shown), shown
    memory = next(
        done.stdout for line, done in walk.ran.items() if line.startswith("agentd goal show")
    )
    assert "nothing to report" in memory, memory
    logged = [
        json.loads(line) for line in walk.log.read_text().splitlines() if line.startswith("{")
    ]
    assert not [e for e in logged if e.get("level") in ("error", "critical")], walk.tail()


def looks(walk: Walk) -> list[Any]:
    store = walk.store()
    try:
        return sorted(
            store.read(lambda c: qc.list_checkins(c, goal_id=1)), key=lambda r: r.checkin_id
        )
    finally:
        store.close()


class Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


# The own-service config's machine-specific values, and what this test points them at.
URL_IN_README = "http://127.0.0.1:8080/health"
LOG_IN_README = "/var/log/checkout/app.log"


@pytest.mark.parametrize(
    ("doc", "heading"),
    [
        (README, "## Watch your own service"),
        (DOCS / "configuration.md", "## Your own service, in full"),
    ],
)
def test_readme_own_service_runs_as_written(
    walk: Walk, http_server: Any, tmp_path: Path, doc: Path, heading: str
) -> None:
    text = section(doc.read_text(), heading)
    (toml,) = blocks(text, "toml")
    assert URL_IN_README in toml, "update this test's placeholders"
    app_log = tmp_path / "app.log"
    app_log.write_text("started\n")
    walk.agentd_home.mkdir(parents=True, mode=0o700)
    config = toml.replace(URL_IN_README, f"{http_server(Healthy)}/health")
    (walk.agentd_home / "config.toml").write_text(config.replace(LOG_IN_README, str(app_log)))

    for line in commands(text):
        walk.run(line)

    def looked() -> bool:
        store = walk.store()
        try:
            world = store.read(lambda c: worlds.last_snapshot(c, "checkout-watch"))
        finally:
            store.close()
        return world is not None and world[1].get("health", {}).get("healthy") is True

    walk.until(looked, "the watcher's first look at the service")
    store = walk.store()
    try:
        goal = store.read(lambda c: q.get_goal(c, 1))
        assert (goal.agent, goal.title) == ("checkout-watch", "Keep checkout healthy")
        assert store.read(lambda c: q.list_runs(c)) == []  # healthy: nothing to do
    finally:
        store.close()


# ── the demo: commands that run as printed, and no process or home left behind ────────────────

REPO = README.parent


def start_demo(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`agentd demo` as `make demo` runs it: the venv's script by its path, from the clone."""
    script = os.path.relpath(VENV_BIN / "agentd", REPO)
    out = tmp_path / "demo.out"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("AGENTD_HOME", None)
    with out.open("wb") as f:
        proc = subprocess.Popen(
            [script, "demo", *args], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    return proc, out


def printed(out: Path, marker: str, proc: subprocess.Popen[bytes], timeout_s: float = 40) -> str:
    """The rest of the first output line holding `marker`, once the demo has printed it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in out.read_text().splitlines():
            if marker in line:
                return line.split(marker, 1)[1].strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the demo never printed {marker!r}:\n{out.read_text()}")


def shell(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, "-c", line], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )


def test_demo_prints_commands_that_run_as_printed(tmp_path: Path) -> None:
    proc, out = start_demo(tmp_path, "--keep")
    try:
        approve = printed(out, "answer it:", proc)
        assert approve.startswith(os.path.relpath(VENV_BIN / "agentd", REPO)), approve
        done = shell(approve)
        assert done.returncode == 0, done.stderr
        assert proc.wait(60) == 0, out.read_text()
    finally:
        proc.kill()
    explore = printed(out, "explore it with", proc)
    shown = shell(explore)
    assert shown.returncode == 0 and "rollback" in shown.stdout, shown.stdout + shown.stderr


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line names `text` (the demo's children name its home)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and text in cmdline:
            found.append(int(proc.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_demo_stops_its_processes_and_removes_its_home_on_a_signal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    proc, out = start_demo(tmp_path)
    try:
        home = Path(printed(out, "agentd demo — home", proc))
        printed(out, "answer it:", proc)  # the service and the daemon are up, a run waits
        assert len(processes_mentioning(str(home))) >= 2
        proc.send_signal(sig)
        assert proc.wait(30) == 128 + sig, out.read_text()
    finally:
        proc.kill()
    assert processes_mentioning(str(home)) == []
    assert not home.exists(), "the demo left its temporary home"


# ── every ```toml block in README.md and docs/*.md loads through agentd's config loader ─────────


def toml_value(value: Any) -> str:
    """`value` as a TOML value (inline tables and arrays; JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict), value
    return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_text(table: dict[str, Any], prefix: str = "") -> str:
    """A parsed config written back as TOML: each table's plain keys, then its sub-tables."""
    plain = [
        f"{toml_key(k)} = {toml_value(v)}"
        for k, v in table.items()
        if not isinstance(v, dict) or not v  # an empty table inline: a header alone is lost
    ]
    out = [f"[{prefix}]", *plain] if prefix and plain else plain
    for key, value in table.items():
        if isinstance(value, dict) and value:
            out.append(toml_text(value, f"{prefix}.{toml_key(key)}" if prefix else toml_key(key)))
    return "\n".join(out)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over`'s tables added to `base`'s, key by key (as a reader edits the tables it names)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def toml_examples() -> list[tuple[str, int, str]]:
    found = []
    for doc in [README, *sorted(DOCS.glob("*.md"))]:
        for n, block in enumerate(blocks(doc.read_text(), "toml"), 1):
            found.append((doc.name, n, block))
    return found


@pytest.fixture(scope="module")
def fresh_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The config.toml a fresh `agentd init` writes: what a reader adds a doc's tables to."""
    home = tmp_path_factory.mktemp("init") / "home"
    done = CliRunner().invoke(app, ["--home", str(home), "init"])
    assert done.exit_code == 0, done.output
    return tomllib.loads((home / "config.toml").read_text())


def test_every_toml_example_in_the_docs_loads(fresh_config: dict[str, Any], tmp_path: Path) -> None:
    """A block that loads as it is and has an agent is a whole config, the one later blocks of
    its page add their tables to; any other block's tables are added to the page's last whole
    config, or to a fresh `agentd init` config. Each goes through config.load, so an unknown key,
    a wrong type or a dangling name fails here, with the page and the block."""
    assert len(toml_examples()) >= 9  # README and every page that shows config
    bases: dict[str, dict[str, Any]] = {}
    broken = []
    for name, n, block in toml_examples():
        folder = tmp_path / f"{name}-{n}"
        folder.mkdir()
        raw = tomllib.loads(block)
        try:
            if raw.get("agents") and load_text(folder / "alone.toml", block):
                bases[name] = raw
                continue
        except ConfigError:
            pass
        full = merged(bases.get(name, fresh_config), raw)
        assert tomllib.loads(toml_text(full)) == full  # the test's own writer loses nothing
        try:
            load_text(folder / "config.toml", toml_text(full))
        except ConfigError as e:
            broken.append(f"{name}, ```toml block {n}, added to the config before it: {e}")
    assert not broken, "\n".join(broken)


def load_text(path: Path, text: str) -> bool:
    path.write_text(text)
    config.load(path)
    return True


# ── links: every relative link in README.md and docs/*.md names a file (and a heading) that exists ──

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(doc: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in section_free(doc.read_text()):
        if m := re.match(r"^#+ (.*)", line):
            slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def section_free(text: str) -> list[str]:
    """The lines outside fenced blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    broken = []
    for doc in [README, *sorted(DOCS.glob("*.md"))]:
        for line in section_free(doc.read_text()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path, _, fragment = target.partition("#")
                file = (doc.parent / path).resolve() if path else doc
                if not file.exists():
                    broken.append(f"{doc.name}: {target}")
                elif fragment and file.suffix == ".md" and fragment not in anchors(file):
                    broken.append(f"{doc.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_install_never_names_the_index_agentd() -> None:
    """The index's `agentd` is an unrelated project: the distribution has its own name, and no
    install instruction fetches the other one (the warnings against it quote it in backticks)."""
    project = (README.parent / "pyproject.toml").read_text()
    assert re.search(r'^name = "agentd-daemon"', project, flags=re.M)
    assert re.search(r'^agentd = "agentd.cli:main"', project, flags=re.M)  # the command stays
    unit = (README.parent / "systemd" / "agentd.service").read_text()
    assert "SupplementaryGroups=systemd-journal" in unit
    for doc in [README, *DOCS.glob("*.md"), README.parent / "systemd" / "agentd.service"]:
        text = doc.read_text()
        for m in re.finditer(r"pip install agentd\b", text):
            assert text[m.start() - 1 : m.start()] == "`" and "unrelated" in text, (doc, m)
