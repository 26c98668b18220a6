"""Each daemon records the config it runs (issue 28): on a shared store the home-wide record is
only the last daemon to load's, so `doctor` compares the file with *this host's* daemon's own
record, and `status` shows every daemon's config digest and when it loaded it, and flags the
live ones that run another config than the others."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from agentd.cli.doctor import check_loaded_config
from agentd.db import leases, meta
from agentd.operator import daemons
from agentd.views.daemons import daemons_table
from tests.conftest import Home

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""
OLD = "0" * 64  # the config before it was tightened


def two_daemons(home: Home, mine: str, theirs: str) -> None:
    """This host's daemon (pid 4242) runs `mine`; another host's, which reloaded last, runs
    `theirs` — and so wrote the home-wide record."""
    here = socket.gethostname()

    def arrange(c: object) -> None:
        for owner, host, pid, sha in ((f"{here}:4242:a", here, 4242, mine),
                                      ("other:77:b", "other-host", 77, theirs)):  # fmt: skip
            leases.register(c, owner=owner, host=host, pid=pid, version="v", lease_s=3600)  # type: ignore[arg-type]
            leases.loaded_config(c, owner, sha)  # type: ignore[arg-type]
        meta.set_loaded_config(c, theirs)  # type: ignore[arg-type]

    home.store.write(arrange)


@pytest.mark.backends
def test_doctor_compares_the_file_with_this_hosts_daemon(home: Home) -> None:
    home.write_config(CONFIG, [])
    on_disk = hashlib.sha256(home.paths.config.read_bytes()).hexdigest()
    # Tightened on both hosts, reloaded on the other one only: this daemon runs the old rules.
    two_daemons(home, mine=OLD, theirs=on_disk)
    found = check_loaded_config(home.paths, 4242, shared=home.store_url is not None)
    assert found is not None and not found.ok, found
    assert "pid 4242" in found.message and "agentd reload" in found.message


@pytest.mark.backends
def test_doctor_vouches_when_this_hosts_daemon_runs_the_file(home: Home) -> None:
    home.write_config(CONFIG, [])
    on_disk = hashlib.sha256(home.paths.config.read_bytes()).hexdigest()
    two_daemons(home, mine=on_disk, theirs=OLD)
    # The other host's started earlier: on SQLite, where one daemon serves a home and its newest
    # start is the one shown, this host's is that one whatever the clock read between the two.
    home.store.write(
        lambda c: c.execute(
            "UPDATE daemons SET started_at = started_at - 60 WHERE owner = ?", ("other:77:b",)
        )
    )
    found = check_loaded_config(home.paths, 4242, shared=home.store_url is not None)
    assert found is not None and found.ok, found


@pytest.mark.backends("postgres")
def test_status_shows_each_daemons_config_and_flags_the_odd_one(home: Home) -> None:
    home.write_config(CONFIG, [])
    new = "1" * 64
    two_daemons(home, mine=OLD, theirs=new)
    shown = daemons.serving(home.store)["daemons"]
    by_host = {d["host"]: d for d in shown}
    assert by_host[socket.gethostname()]["config_sha256"] == OLD
    assert by_host["other-host"]["config_sha256"] == new
    assert all(d["config_loaded_s_ago"] is not None for d in shown)
    # Two live daemons, two configs: the one loaded last is taken as the rule, the other differs.
    assert [d["host"] for d in shown if d["config_differs"]] == [socket.gethostname()]
    text = daemons_table(shown)
    assert "000000000000" in text and "111111111111" in text and "DIFFERS" in text
    assert "live daemons run different configs" in text


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_real_daemon_records_its_config_at_start_and_reload(tmp_path: Path) -> None:
    from tests.daemon.test_daemon import FINISH, Daemon
    from tests.daemon.test_reload import configure, hup

    d = Daemon(tmp_path / "home")
    try:
        d.write([FINISH])
        configure(d, "allow")
        proc = d.serve()

        def runs() -> str | None:
            mine = [r for r in d.store.read(leases.daemons) if r.pid == proc.pid]
            return mine[0].config_sha256 if mine else None

        def on_disk() -> str:
            return hashlib.sha256(d.paths.config.read_bytes()).hexdigest()

        assert runs() == on_disk()
        assert check_loaded_config(d.paths, proc.pid).ok  # type: ignore[union-attr]
        configure(d, "approve")  # tightened, not reloaded yet: doctor says so
        assert not check_loaded_config(d.paths, proc.pid).ok  # type: ignore[union-attr]
        hup(d, proc, '"config.reloaded"')
        assert runs() == on_disk()
        assert check_loaded_config(d.paths, proc.pid).ok  # type: ignore[union-attr]
        assert d.terminate(proc)[0] == 0
    finally:
        d.kill_all()
