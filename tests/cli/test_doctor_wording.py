"""`agentd doctor`'s words fit the case (issue 19, item 5): an absolute program path that does not
exist says so; a server's HTTP 500 is a failing service, not "check the URL and port"; a 404 points
at the path; a refused connection on a watched URL is a warning that a run will start, no FAIL —
and only when an agent's trigger names that state (a watch alone only records it).
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any

from typer.testing import CliRunner

from agentd.cli import app
from tests.cli.test_doctor_checks import doctor, setup
from tests.conftest import Home, ServeHttp, closed_port


def answering(status: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def watched(url: str, triggers: str = '["site.unhealthy"]') -> str:
    return (
        f'\n[sources.site]\ntype = "http"\nurl = "{url}"\n'
        '\n[agents.ops]\nactions = ["finish"]\nsources = ["site"]\n'
        f"watch = {{ interval_s = 60 }}\ntriggers = {triggers}\n"
    )


def test_doctor_absolute_program_path_that_does_not_exist_says_so(home: Home) -> None:
    setup(home, '\n[actions.page]\ntype = "command"\nargv = ["/opt/agentd-nowhere/pager"]\n'
          '\n[agents.ops]\nactions = ["page"]\n')  # fmt: skip

    result, checks = doctor(home)

    assert result.exit_code == 1
    message = checks["program page"]["message"]
    assert "/opt/agentd-nowhere/pager does not exist" in message, message
    assert "current folder" not in message


def test_doctor_http_500_is_a_failing_service_not_a_wrong_port(
    home: Home, http_server: ServeHttp
) -> None:
    setup(home, watched(http_server(answering(500)) + "/health"))

    result, checks = doctor(home)

    site = checks["source site"]
    assert result.exit_code == 0 and not site["ok"] and not site["required"]
    assert "HTTP 500" in site["message"] and "up and failing" in site["message"]
    assert "URL and port" not in site["message"] and "check the URL" not in site["message"]


def test_doctor_http_404_points_at_the_path(home: Home, http_server: ServeHttp) -> None:
    setup(home, watched(http_server(answering(404)) + "/helth"))

    _result, checks = doctor(home)

    assert "check the URL's path" in checks["source site"]["message"]


def test_doctor_refused_on_a_watched_url_warns_that_a_run_starts(home: Home) -> None:
    setup(home, watched(f"http://127.0.0.1:{closed_port()}/"))

    result, checks = doctor(home)

    site = checks["source site"]
    assert result.exit_code == 0 and not site["ok"] and not site["required"]
    assert "nothing answered there" in site["message"] and site["warning"]
    assert "ops watches it, so a run starts on this" in site["message"]
    text = CliRunner().invoke(app, ["--home", str(home.root), "doctor"]).stdout
    assert any(line.startswith("warn  source site") for line in text.splitlines()), text


def test_doctor_refused_on_a_watched_url_without_a_trigger_says_no_run_starts(home: Home) -> None:
    setup(home, watched(f"http://127.0.0.1:{closed_port()}/", triggers='["site.healthy"]'))

    result, checks = doctor(home)

    site = checks["source site"]
    assert result.exit_code == 0 and not site["ok"] and not site["warning"]
    assert "a run starts" not in site["message"]
    assert "ops watches it, but no agent's trigger starts a run on it" in site["message"]
