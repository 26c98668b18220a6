"""`agentd web`: the login URL is the one the running daemon serves (asked over its socket), an
inbox it does not serve is an error that never prints the token, and `--json` for scripts."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
from typing import Any

import httpx
from click.testing import Result
from typer.testing import CliRunner

from agentd.cli import app
from tests.conftest import Home, closed_port

CONFIG = """
[models.default]
provider = "scripted"
replies = "replies.json"

[agents.default]
actions = ["finish"]
"""
FINISH = {"reason": "done", "action": {"kind": "finish", "outcome": "succeeded", "summary": "ok"}}


def cli(home: Home, *args: str) -> Result:
    return CliRunner().invoke(app, ["--home", str(home.root), *args])


def web(home: Home, *args: str) -> Result:
    return cli(home, "web", *args)


async def web_async(home: Home, *args: str) -> Result:
    """From a thread: the in-process daemon must stay free to answer the CLI's question."""
    return await asyncio.to_thread(web, home, *args)


def listening_socket() -> tuple[socket.socket, int]:
    """Another program holding a loopback port (close it when done)."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(1)
    return squatter, int(squatter.getsockname()[1])


def test_web_off_says_how_to_turn_it_on_and_never_prints_or_makes_a_token(home: Home) -> None:
    home.write_config(CONFIG, [FINISH])
    done = web(home)
    assert done.exit_code == 1
    assert "[web]" in done.stderr and "enabled = true" in done.stderr
    assert "Bearer" not in done.output and not home.paths.api_token.exists()


def test_web_with_the_daemon_down_prints_the_configured_url_and_says_so(home: Home) -> None:
    port = closed_port()
    home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
    home.store  # noqa: B018  # creates the database
    done = web(home, "--json")
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    token = home.paths.api_token.read_text().strip()
    assert data["url"] == f"http://127.0.0.1:{port}/login?token={token}"
    assert data["port"] == port and data["served"] is False and data["daemon_pid"] is None
    assert data["tunnel"].startswith(f"ssh -N -L {port}:127.0.0.1:{port} ")
    assert any("no daemon serves this home" in n for n in data["notes"])


async def test_web_prints_the_port_the_daemon_listens_on(home: Home, serve: Any) -> None:
    port = closed_port()
    home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
    await serve()
    done = await web_async(home)
    assert done.exit_code == 0, done.output
    token = home.paths.api_token.read_text().strip()
    assert done.stdout.strip() == f"http://127.0.0.1:{port}/login?token={token}"
    assert "note:" not in done.stderr
    data = json.loads((await web_async(home, "--json")).stdout)
    assert data["served"] is True and data["port"] == port and data["notes"] == []
    status = await asyncio.to_thread(cli, home, "status")
    assert f"http://127.0.0.1:{port} (`agentd web` prints the login URL)" in status.stdout
    assert token not in status.stdout
    report = await asyncio.to_thread(cli, home, "doctor")
    assert f"served on 127.0.0.1:{port}" in report.stdout


async def test_web_refuses_a_port_another_program_holds(home: Home, serve: Any) -> None:
    """The daemon could not listen (another program has the port): printing the URL would hand
    the token to that program."""
    squatter, port = listening_socket()
    try:
        home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
        await serve()
        done = await web_async(home)
        status = await asyncio.to_thread(cli, home, "status")
        status_json = json.loads((await asyncio.to_thread(cli, home, "status", "--json")).stdout)
        report = await asyncio.to_thread(cli, home, "doctor")
    finally:
        squatter.close()
    assert f"web inbox: not served: could not listen on 127.0.0.1:{port}" in status.stdout
    assert status_json["web"] == {"port": None, "port_failed": f"{port}: Address already in use"}
    assert report.exit_code == 1 and "web inbox" in report.stdout
    assert f"not served: could not listen on 127.0.0.1:{port}" in report.stdout
    assert done.exit_code == 1, done.output
    assert f"could not listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "api.port_failed" in done.stderr
    assert home.paths.api_token.read_text().strip() not in done.output


async def test_web_enabled_after_the_start_asks_for_a_restart(home: Home, serve: Any) -> None:
    home.write_config(CONFIG, [FINISH])
    await serve()
    home.write_config(CONFIG + "\n[web]\nenabled = true\n", [FINISH])
    done = await web_async(home)
    assert done.exit_code == 1, done.output
    assert "serves no web inbox" in done.stderr and "restart `agentd serve`" in done.stderr
    assert "could not listen" not in done.stderr  # nothing failed: it was not asked to
    assert home.paths.api_token.read_text().strip() not in done.output


async def test_web_rotate_ends_the_old_token_at_the_running_daemon(home: Home, serve: Any) -> None:
    port = closed_port()
    home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
    await serve()
    old = home.paths.api_token.read_text().strip()
    done = await web_async(home, "--rotate", "--json")
    assert done.exit_code == 0, done.output
    new = home.paths.api_token.read_text().strip()
    assert new != old and json.loads(done.stdout)["url"].endswith(f"?token={new}")
    assert stat.S_IMODE(home.paths.api_token.stat().st_mode) == 0o600
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
        refused = await c.get("/api/inbox", headers={"Authorization": f"Bearer {old}"})
        taken = await c.get("/api/inbox", headers={"Authorization": f"Bearer {new}"})
    assert refused.status_code == 401 and taken.status_code == 200


def test_web_with_the_daemon_down_refuses_a_port_another_program_listens_on(home: Home) -> None:
    squatter, port = listening_socket()
    try:
        home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
        done = web(home)
    finally:
        squatter.close()
    assert done.exit_code == 1, done.output
    assert f"another program listens on 127.0.0.1:{port}" in done.stderr
    assert "token=" not in done.output


async def test_a_weak_token_is_refused_and_the_daemon_keeps_the_last_good_one(
    home: Home, serve: Any
) -> None:
    port = closed_port()
    home.write_config(CONFIG + f"\n[api]\nport = {port}\n\n[web]\nenabled = true\n", [FINISH])
    await serve()
    good = home.paths.api_token.read_text().strip()
    for weak in ("", "short"):
        home.paths.api_token.write_text(weak + "\n")
        shown = await web_async(home, "--token")
        assert shown.exit_code == 2 and "agentd web --rotate" in shown.stderr, shown.output
        report = await asyncio.to_thread(cli, home, "doctor")
        assert report.exit_code == 1 and "too short to be safe" in report.stdout
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            if weak:
                refused = await c.get("/api/inbox", headers={"Authorization": f"Bearer {weak}"})
                assert refused.status_code == 401
            kept = await c.get("/api/inbox", headers={"Authorization": f"Bearer {good}"})
            assert kept.status_code == 200
    rotated = await web_async(home, "--rotate", "--token")
    assert rotated.exit_code == 0 and len(rotated.stdout.strip()) >= 32
