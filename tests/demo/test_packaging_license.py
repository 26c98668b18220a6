"""The package metadata says its license as an SPDX expression (PEP 639): the table form
`license = { text = … }` made setuptools print a deprecation warning at every build (three times
in `make demo`)."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_pyproject_license_is_an_spdx_expression() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))
