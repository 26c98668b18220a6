"""The stores the daemon opens for its web inbox and API (`home.open_store(poke=False)`) keep the
lease's statement timeout on their reads, as the daemon's own connections do (issue 31): only the
CLI's reads are unbounded. Without it, a read the server was slow to answer held a web or API
request's thread (the loop's shared executor) for as long as it took."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.operator import home


def timeout(c: Any) -> str:
    return str(c.execute("SHOW statement_timeout").fetchone()[0])


def test_the_daemons_web_and_api_reads_keep_the_statement_timeout(
    pg_url: str, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(f'[store]\nurl = "{pg_url}"\n')
    db = tmp_path / "agentd.db"
    home.open_store(db).close()  # created and migrated
    inside = home.open_store(db, poke=False)  # the web inbox's and the API's
    cli = home.open_store(db)
    try:
        assert inside.read(timeout) != "0"
        assert cli.read(timeout) == "0"
    finally:
        inside.close()
        cli.close()
