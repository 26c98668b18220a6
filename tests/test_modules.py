"""House rules every module under agentd/ keeps: at most 600 lines, and a module docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import agentd

MAX_LINES = 600
PACKAGE = Path(agentd.__file__).parent


def modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert found, f"no modules found under {PACKAGE}"
    return found


def name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_no_module_is_longer_than_600_lines() -> None:
    lengths = {name(p): len(p.read_text().splitlines()) for p in modules()}
    too_long = {n: count for n, count in lengths.items() if count > MAX_LINES}
    assert not too_long, f"split these modules (at most {MAX_LINES} lines each): {too_long}"


def test_every_module_has_a_docstring() -> None:
    missing = [name(p) for p in modules() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"add a module docstring saying what each is for: {missing}"
