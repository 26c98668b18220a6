"""Shared fixtures: a real migrated home in tmp_path, an in-process daemon, a loopback HTTP server,
and a network guard.

The store's engine: a test that asks for `backend` (directly, or through `home`, `serve`,
`store_url`, `backend_at`) runs on SQLite, or once per engine when it is marked
`@pytest.mark.backends` (a module opts in with `pytestmark = pytest.mark.backends`):

- `@pytest.mark.backends` — on SQLite and on PostgreSQL (a fresh database from `pg_url`, so a
  missing PostgreSQL skips loudly, or fails under AGENTD_REQUIRE_POSTGRES=1);
- `@pytest.mark.backends("sqlite")` — SQLite only (a test of SQLite's own: PRAGMA, file faults);
- `@pytest.mark.backends(xfail_postgres="…")` — both, and the PostgreSQL run is a strict xfail
  naming a product bug not fixed yet.

On PostgreSQL the home's config.toml gets `[store] url = "…"` (every process that opens the
home, the CLI and the daemon, finds the database there), and `Home.store` is opened on it even
before a config is written."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentd import config
from agentd.daemon import serve as daemon
from agentd.db import queries as q
from agentd.db.backend import Backend
from agentd.db.store import SyncStore
from agentd.models import RunStatus

# Real-browser fixtures (`browser`, `sync_browser`, `screenshots`): Debian's Chromium via Playwright.
# PostgreSQL fixtures (`pg_cluster`, `pg_url`): a throw-away cluster per test process.
# Daemon processes (`daemons`): `agentd serve` started, waited on and killed at teardown.
pytest_plugins = [
    "tests.servers",  # the real servers' common plumbing and their skip banners
    "tests.xdist_groups",  # `xdist_group` marks group again under pytest 9.2 (xdist #1386)
    "tests.ordering",  # the longest modules first (the last run's times)
    "tests.browser_support",
    "tests.postgres",
    "tests.processes",
    "tests.dovecot",
    "tests.alertmanager",
]

BACKENDS = ("sqlite", "postgres")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backends(*names, xfail_postgres=None): run the test once per store engine "
        "(sqlite, postgres); see tests/conftest.py",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise `backend` for a test marked `backends` (the closest mark wins: a test's own
    over its module's); an unmarked test gets the fixture's default, SQLite."""
    mark = metafunc.definition.get_closest_marker("backends")
    if mark is None or "backend" not in metafunc.fixturenames:
        return
    names = mark.args or BACKENDS
    unknown = set(names) - set(BACKENDS)
    assert not unknown, f"backends: unknown engine(s) {sorted(unknown)}"
    xfail = mark.kwargs.get("xfail_postgres")
    params = [
        pytest.param(
            name,
            id=name,
            marks=[pytest.mark.xfail(reason=xfail, strict=True)]
            if xfail and name == "postgres"
            else [],
        )
        for name in names
    ]
    metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The store engine of this test: "sqlite" unless the test is marked `backends`."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL URL the test's home keeps its state in (a fresh database at the latest
    schema, holding no rows: tests/postgres.py's `pg_migrated_url`), or None for the SQLite file
    in the home."""
    if backend == "postgres":
        return str(request.getfixturevalue("pg_migrated_url"))
    return None


_fresh_databases = itertools.count(1)
# Opens a store of its own for one home (a property's example): yields its URL, None on SQLite.
FreshStore = Callable[[], contextlib.AbstractContextManager[str | None]]


@pytest.fixture
def fresh_store_url(backend: str, request: pytest.FixtureRequest) -> FreshStore:
    """For a test that makes a home per example (hypothesis runs every example on one fixture):
    `with fresh_store_url() as url:` a new PostgreSQL database at the latest schema holding no
    rows (a copy of `pg_migrated`), dropped after the block, or None on SQLite (each home has
    its own file)."""
    if backend != "postgres":
        return contextlib.nullcontext
    cluster = request.getfixturevalue("pg_cluster")
    template = request.getfixturevalue("pg_migrated")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @contextlib.contextmanager
    def fresh() -> Iterator[str | None]:
        name = f"f{next(_fresh_databases)}_{worker}"
        url = str(cluster.create_database(name, template=template))
        try:
            yield url
        finally:
            cluster.drop_database(name)

    return fresh


# A property's generated examples on PostgreSQL (its explicit @example cases always run): each
# costs a database and a daemon there, which stops a second slower (its LISTEN thread), and what
# the engine does is the same in each; SQLite keeps the property's own count.
PG_PROPERTY_EXAMPLES = 5


def property_examples(backend: str, sqlite: int) -> int:
    """How many examples a property generates on `backend`: its own `sqlite` count, or fewer."""
    return sqlite if backend == "sqlite" else min(sqlite, PG_PROPERTY_EXAMPLES)


def backend_of(path: Path, url: str | None) -> Backend:
    """The Backend of the home whose SQLite file is at `path`: that file, or the database at `url`."""
    if url is None:
        from agentd.db.sqlite.backend import SQLiteBackend

        return SQLiteBackend(path)
    from agentd.db.postgres.backend import PostgresBackend  # psycopg: only on PostgreSQL

    return PostgresBackend(url, path.parent)


@pytest.fixture
def backend_at(store_url: str | None) -> Callable[[Path], Backend]:
    """Opens the Backend for a SQLite file path: that file, or (on PostgreSQL) the test's one
    database, whatever the path (a test that makes several files shares it there)."""
    return lambda path: backend_of(path, store_url)


def store_table(url: str | None) -> str:
    """The `[store]` table of a config that keeps its state at `url` ("" for the SQLite file)."""
    return "" if url is None else f'\n[store]\nurl = "{url}"\n'


_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("127."):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails loudly."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture(autouse=True)
def no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Views fit `COLUMNS` (agentd/views/tables.py), and pytest-xdist's workers run with
    COLUMNS=80 while a plain run has none: without this, a table test passes or fails by how the
    suite is run. A test about widths sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


class Home:
    """A throw-away agentd home: config text, replies, and a sync store for arranging/asserting."""

    def __init__(self, root: Path, store_url: str | None = None) -> None:
        self.root = root
        self.paths = config.Paths(root)
        self.store_url = store_url  # None: the SQLite file in the home
        self._store: SyncStore | None = None

    def config_text(self, text: str) -> str:
        """`text` (dedented) with this home's `[store]` table, unless it has one of its own."""
        text = textwrap.dedent(text)
        return text if "[store]" in text else text + store_table(self.store_url)

    def write_config(self, text: str, replies: list[Any] | None = None) -> config.Config:
        self.root.mkdir(parents=True, exist_ok=True)
        self.paths.config.write_text(self.config_text(text))
        if replies is not None:
            (self.root / "replies.json").write_text(json.dumps(replies))
        return config.load(self.paths.config)

    def backend(self) -> Backend:
        """A Backend of this home's database (a new one each call, as each store opens its own)."""
        return backend_of(self.paths.db, self.store_url)

    @property
    def store(self) -> SyncStore:
        if self._store is None:
            self._store = SyncStore(self.paths.db, backend=self.backend())
        return self._store

    def add_goal(self, agent: str = "default", title: str = "a goal") -> int:
        return self.store.write(
            lambda c: q.add_goal(
                c, title=title, why="tests", agent=agent, criteria=[], deadline=None
            )
        )

    def start_run(self, goal_id: int) -> int:
        return self.store.write(
            lambda c: q.create_run(c, goal_id=goal_id, agent="default", trigger="test")
        )

    def run(self, run_id: int) -> Any:
        return self.store.read(lambda c: q.get_run(c, run_id))

    def steps(self, run_id: int) -> list[Any]:
        return self.store.read(lambda c: q.list_steps(c, run_id))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


@pytest.fixture
def home(tmp_path: Path, store_url: str | None) -> Any:
    """A home in tmp_path; on PostgreSQL (a test marked `backends`) its state is in a database."""
    h = Home(tmp_path / "home", store_url)
    yield h
    h.close()


class RunningDaemon:
    def __init__(self, task: asyncio.Task[int], stop: asyncio.Event) -> None:
        self.task = task
        self.stop = stop

    async def shutdown(self) -> int:
        self.stop.set()
        return await asyncio.wait_for(self.task, 20)


@pytest.fixture
async def serve(home: Home) -> AsyncIterator[Callable[..., Any]]:
    """Start an in-process daemon on the home (after its config is written); stopped at teardown."""
    started: list[RunningDaemon] = []

    async def start(**options: Any) -> RunningDaemon:
        # options: daemon.serve's keywords (clock_speed, clock_start, models, …)
        cfg = config.load(home.paths.config)
        stop = asyncio.Event()
        ready = asyncio.Event()
        task = asyncio.create_task(
            daemon.serve(home.paths, cfg, ready=ready.set, stop=stop, **options)
        )
        waiter = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait({task, waiter}, timeout=10, return_when="FIRST_COMPLETED")
        if task in done:
            task.result()  # raises the start-up error
        running = RunningDaemon(task, stop)
        started.append(running)
        return running

    yield start
    for d in started:
        if not d.task.done():
            await d.shutdown()


async def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def finished(home: Home, run_id: int) -> Callable[[], bool]:
    return lambda: home.run(run_id).status.finished


def waiting(home: Home, run_id: int) -> Callable[[], bool]:
    return lambda: home.run(run_id).status == RunStatus.WAITING


# Starts a loopback server for a handler class and returns its base URL.
ServeHttp = Callable[[type[BaseHTTPRequestHandler]], str]


@pytest.fixture
def http_server() -> Iterator[ServeHttp]:
    """Serve handler classes on loopback ports; every server is stopped at teardown.

    Each handler gets a `release` event, set at teardown, so a request parked on it (a slow
    endpoint a timeout test gave up on) returns and the server can shut down.
    """
    release = threading.Event()
    running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        bound = type("Handler", (handler,), {"release": release})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), bound)
        httpd.daemon_threads = True
        # A client that gave up mid-reply is expected in these tests, not worth a traceback.
        httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        running.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    release.set()
    for httpd, thread in running:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, read, released), for connection-refused tests."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
