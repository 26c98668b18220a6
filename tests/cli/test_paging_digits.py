"""--after and --limit of the list commands hold at most 18 digits (what the store's signed 64-bit
integer holds): more is a usage error naming the option and its range — before, a 30-digit
--limit on PostgreSQL was "URL: bigint out of range" and on SQLite an error about ids; 18 digits
is an empty page."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from agentd.cli import app
from tests.cli.test_paging import CONFIG, REPLIES

pytestmark = pytest.mark.backends

LISTS = [["goal", "list"], ["runs", "list"], ["event", "list"], ["inbox", "list"]]


@pytest.mark.parametrize("command", LISTS)
def test_30_digits_are_a_usage_error(home: Any, command: list[str]) -> None:
    home.write_config(CONFIG, REPLIES)
    home.store.write(lambda c: None)  # the database, with no rows
    root = str(home.root)
    runner = CliRunner()
    huge = runner.invoke(app, ["--home", root, *command, "--after", "1" * 30, "--limit", "5"])
    many = runner.invoke(app, ["--home", root, *command, "--limit", "1" * 30])
    fine = runner.invoke(app, ["--home", root, *command, "--json", "--after", "9" * 18])
    for result in (huge, many):  # a usage error (2) that names the option and its range
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert "--after" in huge.output and "--limit" in many.output
    assert fine.exit_code == 0, fine.output
    assert fine.output.strip() == "[]"
