"""`agentd doctor`, through the real CLI, warns of a URL in the config that seems to hold a
credential (a random-looking path segment or query value, a user name and password, a query key
like token or sig) and says how to name it instead — `{secret:NAME}` where agentd fills one —
without printing the credential; URLs that hold placeholders or plain words pass quietly."""

from __future__ import annotations

import json
import subprocess

import pytest

from agentd.text import url_credentials, url_shown
from tests.cli.test_doctor_checks import AGENTD, BASE, setup
from tests.conftest import Home, closed_port

PATH_SECRET = "Xk9fQ2mZ7pLwR4tV8bN3cH6j"
QUERY_SECRET = "SECRETVALUE"


def doctor(home: Home) -> tuple[str, dict[str, dict[str, object]]]:
    done = subprocess.run(
        [*AGENTD, "--home", str(home.root), "doctor", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    report = json.loads(done.stdout[done.stdout.find("{\n") :])
    return done.stdout + done.stderr, {c["name"]: c for c in report["checks"]}


def test_doctor_warns_of_credentials_in_urls_and_points_to_secret_names(home: Home) -> None:
    port = closed_port()
    setup(
        home,
        f"""
[actions.hook]
type = "http"
urls = ["https://hooks.example/services/{PATH_SECRET}"]

[actions.page]
type = "http"
urls = {{ oncall = "https://pager.example/v1/page?token={QUERY_SECRET}" }}

[sources.site]
type = "http"
url = "http://127.0.0.1:{port}/health?api_key={QUERY_SECRET}"

[notify.ops]
type = "webhook"
url = "https://chat.example/hooks/{PATH_SECRET}"
""",
    )

    output, checks = doctor(home)

    hook, page = checks["url action hook"], checks["url action page"]
    ops, site = checks["url notify ops"], checks["url source site"]
    for check in (hook, page, ops, site):
        assert not check["ok"] and not check["required"]  # a warning: the home still works
    assert "random-looking" in str(hook["message"]) and "{secret:NAME}" in str(hook["message"])
    assert "'token'" in str(page["message"]) and "{secret:NAME}" in str(page["message"])
    assert "{secret:NAME}" in str(ops["message"])
    assert "'api_key'" in str(site["message"])
    assert "https://hooks.example/…" in str(hook["message"])  # which URL, by its host
    assert PATH_SECRET not in output and QUERY_SECRET not in output


def test_doctor_is_quiet_about_urls_with_placeholders_and_plain_words(home: Home) -> None:
    setup(
        home,
        """
[actions.hook]
type = "http"
urls = { hook = "https://hooks.example/services/{secret:HOOK_PATH}?token={secret:HOOK_TOKEN}" }

[actions.restart_api]
type = "http"
urls = ["https://deploy.example/v1/services/{service}/restart"]
params = { service = { choices = ["web", "worker"] } }

[notify.ops]
type = "webhook"
url = "https://chat.example/hooks/{secret:CHAT_HOOK}"
""",
        base=BASE.replace('actions = ["finish", "restart"]', 'actions = ["finish", "hook"]'),
    )

    _, checks = doctor(home)

    assert not [name for name in checks if name.startswith("url ")]


@pytest.mark.parametrize(
    ("url", "found"),
    [
        (f"https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/{PATH_SECRET}", "random-looking"),
        (
            "https://discord.com/api/webhooks/1234567890/mG3xQ-9vR_kT2bLp7sWz1YcN4hJ",
            "random-looking",
        ),
        ("https://api.example/x?sig=abc", "'sig'"),
        ("https://api.example/x?X-Amz-Signature=abc", "'X-Amz-Signature'"),
        ("https://api.example/x?access_token=abc", "'access_token'"),
        ("https://user:hunter2@api.example/x", "user name and password"),
        ("https://api.example/x?id=550e8400-e29b-41d4-a716-446655440000", "random-looking"),
        # Missed by the issue-18 review: a Telegram bot token, a fragment, a ;parameter.
        (
            "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
            "random-looking path segment",
        ),
        ("https://x.example/h#token=abcd1234efgh5678ijkl", "the fragment's 'token'"),
        ("https://x.example/h;jsessionid=Xk9fQ2mZ7pLwR4tV8bN3cH6j", "random-looking path"),
        ("https://x.example/h#Xk9fQ2mZ7pLwR4tV8bN3cH6j", "a random-looking fragment"),
    ],
)
def test_url_credentials_finds_what_looks_like_a_secret(url: str, found: str) -> None:
    assert any(found in what for what in url_credentials(url)), url_credentials(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/health",
        "https://deploy.example/v1/services/{service}/restart",
        "https://hooks.example/{secret:HOOK}?token={secret:TOKEN}",
        "https://api.example/getUserProfileData?page=2&sort=name",
        "https://api.example/items/123456789012?monkey=banana",
        "https://ntfy.sh",
        "https://example.com/docs#section-2",
        "https://example.com/a:b;c=d",
    ],
)
def test_url_credentials_passes_plain_urls(url: str) -> None:
    assert url_credentials(url) == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://hooks.example/services/{PATH_SECRET}?token=x", "https://hooks.example/…"),
        ("https://user:pw@api.example:8443/x", "https://api.example:8443/…"),
        ("http://127.0.0.1:9/", "http://127.0.0.1:9/"),
        ("https://ntfy.sh", "https://ntfy.sh"),
        ("http://h?token=x", "http://h/…"),
    ],
)
def test_url_shown_keeps_the_scheme_and_host(url: str, shown: str) -> None:
    assert url_shown(url) == shown
