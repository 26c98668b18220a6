"""House rules every module under agentd/ keeps: at most 450 lines and a module docstring; every
folder's __init__ says what it is for and what it may import; the top level holds only the ground;
the tests mirror the package."""

from __future__ import annotations

import ast
from pathlib import Path

import agentd

MAX_LINES = 450  # the style's ~400, with room to split in time
MAX_TOP_LEVEL = 8  # ls agentd/ shows the architecture: folders, and only the ground beside them
PACKAGE = Path(agentd.__file__).parent


def modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert found, f"no modules found under {PACKAGE}"
    return found


def name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_module_is_longer_than_450_lines() -> None:
    lengths = {name(p): len(p.read_text().splitlines()) for p in modules()}
    too_long = {n: count for n, count in lengths.items() if count > MAX_LINES}
    assert not too_long, f"split these modules (at most {MAX_LINES} lines each): {too_long}"


def test_every_module_has_a_docstring() -> None:
    missing = [name(p) for p in modules() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"add a module docstring saying what each is for: {missing}"


def test_every_folder_says_what_it_is_for_and_what_it_may_import() -> None:
    vague = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        if init.parent == PACKAGE:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        opening = " ".join(doc.splitlines()[:4])  # it opens with both, in a few lines
        if not opening or "import" not in opening:
            vague.append(name(init))
    assert not vague, (
        f"open each folder's __init__ docstring with its job and what it may import: {vague}"
    )


def test_the_top_level_holds_only_the_ground() -> None:
    top = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(top) <= MAX_TOP_LEVEL, f"move what is not the ground into a folder: {top}"


# The suite's own suites: tests/<folder>/ for each folder of agentd/; at the root, the shared
# fixtures and the tests of the whole product (the README, the house rules, input limits, secrets).
TESTS = Path(__file__).resolve().parent
# …and the tests of the test suite's own plumbing (tests/browser_support.py, servers.py, ordering.py,
# xdist_groups.py).
WHOLE_PRODUCT = {"test_modules.py", "test_readme.py", "test_input_limits.py", "test_secret_reach.py",
                 "test_browser_support.py", "test_servers.py", "test_ordering.py",
                 "test_xdist_groups.py"}  # fmt: skip


def test_tests_mirror_the_package() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    stray = [
        str(p.relative_to(TESTS))
        for p in sorted(TESTS.rglob("test_*.py"))
        if not (p.parent == TESTS and p.name in WHOLE_PRODUCT)
        and not (p.parent.parent == TESTS and p.parent.name in folders)
    ]
    assert not stray, f"put each test where its module is (tests/<folder of agentd>/): {stray}"
    for sub in TESTS.glob("*/test_*.py"):
        assert (sub.parent / "__init__.py").exists(), f"{sub.parent} needs an __init__.py"
