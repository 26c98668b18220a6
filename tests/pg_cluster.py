"""A throw-away PostgreSQL cluster for the tests and the benches (no pytest here: bench/ uses it too).

Debian's binaries (the newest `/usr/lib/postgresql/*/bin`, or $AGENTD_TEST_PG_BIN), a fresh `initdb`
in a temp dir under /tmp, a unix socket in that dir and no TCP (`listen_addresses = ''`), and fsync,
synchronous_commit and full_page_writes on, so a commit costs what it costs in production.

PostgreSQL refuses to run as root. As root (CI), every server command goes through `runuser -u
postgres --` and the dir is chowned to `postgres` (so it must sit where that user can reach it: /tmp,
not pytest's 0700 tmp_path). As any other user, the commands run as that user and own the dir: no sudo,
no `postgres` account needed. Clients connect as the cluster's superuser `agentd` with trust auth over
the socket, whoever they are.

A dir records the pid of the process that made it (`owner.pid`); starting a cluster first stops and
removes any `agentd-pg-*` cluster beside it whose owner is gone (a run killed before its teardown).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

from tests import servers

PREFIX = "agentd-pg-"
SUPERUSER = "agentd"
PORT = 5432  # names the socket file only (no TCP); each cluster has its own socket dir
INSTALL_HINT = (
    "install it with `bash .ci/install-postgresql` as root (apt-get install postgresql) and "
    "`.venv/bin/pip install 'psycopg[binary]'`, or point $AGENTD_TEST_PG_BIN at a bin dir "
    "holding initdb, pg_ctl and postgres"
)
# Every cluster: durable commits (the figures and the crash tests depend on it), socket only.
BASE_SETTINGS = {
    "listen_addresses": "''",
    "port": str(PORT),
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "100",
}


def bin_dir() -> Path | None:
    """$AGENTD_TEST_PG_BIN, else the newest Debian `/usr/lib/postgresql/<major>/bin`, else None."""
    override = os.environ.get("AGENTD_TEST_PG_BIN")
    candidates = [Path(override)] if override else []
    if not override:
        versions = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.parent.name.isdigit()]
        candidates = sorted(versions, key=lambda p: int(p.parent.name), reverse=True)
    for path in candidates:
        if all((path / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return path
    return None


def run_as() -> str | None:
    """The account the server runs as: `postgres` when we are root, else None (ourselves)."""
    return "postgres" if os.geteuid() == 0 else None


def missing_reason() -> str | None:
    """Why a throw-away cluster cannot start here (a sentence for a skip), or None when it can."""
    missing = []
    if bin_dir() is None:
        where = os.environ.get("AGENTD_TEST_PG_BIN") or "nothing under /usr/lib/postgresql/*/bin"
        missing.append(f"PostgreSQL's server binaries ({where})")
    if importlib.util.find_spec("psycopg") is None:
        missing.append("the Python package `psycopg`")
    if run_as() is not None:
        if shutil.which("runuser") is None:
            missing.append("`runuser` (root must start the server as another user)")
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing.append("the `postgres` account (root must start the server as it)")
    if not missing:
        return None
    return f"POSTGRESQL TEST SKIPPED: missing {' and '.join(missing)}; {INSTALL_HINT}"


class Cluster:
    """One running throw-away cluster. `Cluster.start()` makes it; `stop()` removes it."""

    def __init__(self, root: Path, bins: Path, user: str | None) -> None:
        self.root = root  # also the socket dir
        self.data = root / "data"
        self.log = root / "server.log"
        self._bins = bins
        self._user = user

    @classmethod
    def start(
        cls,
        settings: dict[str, str] | None = None,
        parent: Path | None = None,
        synced_init: bool = False,
    ) -> Cluster:
        """initdb and start a new cluster in a new dir under `parent` (default /tmp; as root the
        `postgres` account must be able to reach it); `settings` add to or override BASE_SETTINGS.
        `synced_init` lets initdb fsync its files (benches: the first WAL segment then starts on
        disk, as on a real server); tests skip that second."""
        reason = missing_reason()
        if reason is not None:
            raise RuntimeError(reason)
        bins = bin_dir()
        assert bins is not None
        parent = parent or Path("/tmp")
        sweep_orphans(parent)
        root = servers.make_dir(PREFIX, parent)
        user = run_as()
        if user is not None:
            account = pwd.getpwnam(user)
            os.chown(root, account.pw_uid, account.pw_gid)
        cluster = cls(root, bins, user)
        try:
            cluster._initdb({**BASE_SETTINGS, **(settings or {})}, synced_init)
            cluster._pg_ctl("start", "-l", str(cluster.log), "-t", "60")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL reaching `dbname` over this cluster's socket."""
        return f"postgresql://{SUPERUSER}@/{dbname}?host={quote(str(self.root))}&port={PORT}"

    def create_database(self, name: str, template: str = "template0") -> str:
        """A new database copied from `template` (by default template0, empty: nothing a test
        left in template1); its URL."""
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}" ENCODING \'UTF8\'')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop `name`, ending any connection a test left open on it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @property
    def socket(self) -> Path:
        """The server's unix socket (a TCP proxy's target: tests/tcp_proxy.py)."""
        return self.root / f".s.PGSQL.{PORT}"

    def stop_server(self) -> None:
        """`pg_ctl stop -m fast`, as a restart or a failover begins: sessions end, dir kept."""
        self._pg_ctl("stop", "-m", "fast", "-t", "60")

    def start_server(self) -> None:
        """Start the server stopped by `stop_server` again."""
        self._pg_ctl("start", "-l", str(self.log), "-t", "60")

    def stop(self) -> None:
        """Stop the server (fast, then immediate) and remove its dir; safe to call twice."""
        if (self.data / "postmaster.pid").exists():
            try:
                self._pg_ctl("stop", "-m", "fast", "-t", "30")
            except RuntimeError:
                # Not running, or not stopping: a postmaster whose dir is gone exits on its own.
                with contextlib.suppress(RuntimeError):
                    self._pg_ctl("stop", "-m", "immediate", "-t", "30")
        shutil.rmtree(self.root, ignore_errors=True)

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def _initdb(self, settings: dict[str, str], synced: bool) -> None:
        # --no-sync: initdb's own final sync only protects the template files of a dir we throw away;
        # the server itself runs with fsync on either way.
        self._run(
            str(self._bins / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-instructions", *([] if synced else ["--no-sync"]),
        )  # fmt: skip
        lines = [f"{key} = {value}" for key, value in settings.items()]
        lines.append(f"unix_socket_directories = '{self.root}'")
        # Appending keeps the file's owner (postgres) and the last setting of a name wins.
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# agentd test cluster\n" + "\n".join(lines) + "\n")

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self._bins / "pg_ctl"), "-D", str(self.data), "-w", *args)

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", self._user, "--"] if self._user else []
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else "(no server log)"
            raise RuntimeError(
                f"{Path(argv[0]).name} {' '.join(argv[1:])} failed ({done.returncode}):\n"
                f"{done.stdout}{done.stderr}\nserver log tail:\n{log}"
            )


def sweep_orphans(parent: Path = Path("/tmp")) -> None:
    """Stop and remove the clusters under `parent` whose test run or bench died before its teardown."""
    bins = bin_dir()

    def stop(root: Path) -> None:
        if bins is not None:
            Cluster(root, bins, run_as()).stop()
        shutil.rmtree(root, ignore_errors=True)

    servers.sweep_orphans(parent, PREFIX, stop)


_alive = servers.alive  # the old name
