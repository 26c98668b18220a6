"""On an empty home `serve` and `status` give the same `init` hint, naming the home."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import agentd


def test_serve_and_status_name_the_same_init_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    hint = f"run `agentd --home {home} init`"
    serve, status = agentd(home, "serve"), agentd(home, "status")
    assert hint in serve.stderr, serve.stderr
    assert hint in status.stderr, status.stderr
