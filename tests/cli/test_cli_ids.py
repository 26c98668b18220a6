"""An id typed on the command line that no row can have is "no such id", never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentd.cli import app

HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    "args", [("goal", "show", HUGE), ("inbox", "approve", HUGE), ("runs", "show", HUGE)]
)
def test_an_id_past_sqlites_integers_is_no_such_id(tmp_path: Path, args: tuple[str, ...]) -> None:
    home = str(tmp_path / "h")
    assert CliRunner().invoke(app, ["--home", home, "init"]).exit_code == 0
    result = CliRunner().invoke(app, ["--home", home, *args])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.exception is not None
    assert result.stderr.startswith("agentd: no such id: that number is larger than any id")
