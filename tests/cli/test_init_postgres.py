"""`agentd init` on a home whose [store] names a PostgreSQL database says what it made where: the schema,
in the database the URL names (without its password) — not a SQLite file it never created (issue 31,
item 4)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from agentd.cli import app

CONFIG = """\
[store]
url = "{url}"

[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""


def test_init_names_the_database_and_schema_it_made_and_never_the_password(
    tmp_path: Path, pg_url: str
) -> None:
    secret_url = pg_url.replace("agentd@", "agentd:s3cret-pw@")  # trust auth ignores it
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG.format(url=secret_url))
    runner = CliRunner()
    first = runner.invoke(app, ["--home", str(home), "init"])
    assert first.exit_code == 0, first.output
    dbname = pg_url.split("/")[3].split("?")[0]
    said = [ln for ln in first.output.splitlines() if "schema" in ln]
    assert len(said) == 1 and said[0].startswith("created the agentd schema (version "), said
    assert f"PostgreSQL database postgresql://agentd@/{dbname}" in said[0]
    assert "s3cret-pw" not in first.output
    assert "agentd.db" not in first.output and not (home / "agentd.db").exists()
    again = runner.invoke(app, ["--home", str(home), "init"])
    assert again.exit_code == 0, again.output
    assert any(ln.startswith("kept the agentd schema") for ln in again.output.splitlines())
    assert "s3cret-pw" not in again.output
