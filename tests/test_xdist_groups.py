"""tests/xdist_groups.py: under `-n 2 --dist loadgroup` the tests of one `xdist_group` run on one
worker (pytest 9.2 with xdist 3.8 dealt them out one by one: xdist#1386), in a throw-away suite
run as a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GROUPED = """import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""
LOOSE = """import pytest


@pytest.mark.parametrize("i", range(6))
def test_loose(i):
    pass
"""


def workers(tmp_path: Path, *plugins: str) -> dict[str, set[str]]:
    """Each test's workers (its name without the group suffix), from a verbose run."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    loaded = [arg for name in plugins for arg in ("-p", name)]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:randomly",
         "-p", "no:cacheprovider", *loaded, "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": ""},
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    seen: dict[str, set[str]] = {}
    for worker, name in re.findall(r"^\[(gw\d)\][^\n]*? PASSED (\S+)", out.stdout, re.M):
        seen.setdefault(name.split("@")[0], set()).add(worker)
    assert len(seen) == 12, out.stdout
    return seen


@pytest.mark.timeout(300)
def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    seen = workers(tmp_path, "tests.xdist_groups")
    grouped = set().union(*(w for name, w in seen.items() if "test_grouped" in name))
    assert len(grouped) == 1, seen
