"""Inbound hooks for a person: `agentd hooks`'s table, and the sender's side of each hook — the
Alertmanager receiver, GitHub's webhook settings, a curl line — which `doctor` and `agentd hooks
--snippet` print. Pure: the URL, the config and the counts are handed in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agentd.config.hooks import HookConfig
from agentd.views.tables import table
from agentd.views.times import relative


def url_of(port: int | None, name: str) -> str | None:
    """Where the hook is served on this host, or None with no `[api] port`."""
    return None if port is None else f"http://127.0.0.1:{port}/hooks/{name}"


def snippet(name: str, hook: HookConfig, url: str) -> str:
    """What to put on the sender's side, secrets by name only."""
    if hook.type == "alertmanager":
        return "\n".join([
            "# alertmanager.yml: a receiver posting to agentd (route alerts to it)",
            "receivers:",
            f"  - name: agentd-{name}",
            "    webhook_configs:",
            f"      - url: {url}",
            "        send_resolved: true",
            "        max_alerts: 500  # agentd records 500 alerts of a notification",
            "        http_config:",
            "          authorization:",
            f"            credentials_file: /etc/alertmanager/{hook.token_env}  # holds ${hook.token_env}",
        ])  # fmt: skip
    if hook.type == "github":
        return "\n".join([
            "# GitHub: the repository's Settings → Webhooks → Add webhook",
            f"#   Payload URL:  {url}   (through your TLS proxy's public address)",
            "#   Content type: application/json",
            f"#   Secret:       the value of ${hook.secret_env}",
            "#   Events:       the ones your agents trigger on (e.g. push, issues)",
        ])  # fmt: skip
    if hook.secret_env is not None:
        return "\n".join([
            "# Sign as Standard Webhooks (https://www.standardwebhooks.com), e.g. in Python:",
            "#   from standardwebhooks.webhooks import Webhook",
            f"#   headers = Webhook(os.environ['{hook.secret_env}']).sign(msg_id, now, body)",
            f"# then POST the body to {url} with webhook-id, webhook-timestamp, webhook-signature",
        ])  # fmt: skip
    return (f'curl -fsS -X POST {url} -H "Authorization: Bearer ${hook.token_env}" '
            "-H 'Content-Type: application/json' -d '{\"service\": \"checkout\"}'")  # fmt: skip


def hooks_table(rows: Sequence[Mapping[str, Any]], now: datetime) -> str:
    shown = [
        (
            r["name"], r["type"], r["url"] or "not served: set [api] port",
            r["recorded"], r["accepted"] if r["accepted"] is not None else "-",
            r["refused"] if r["refused"] is not None else "-",
            relative(r["last_at"], now) if r["last_at"] is not None else "never",
            r["last"] or "-",
        )
        for r in rows
    ]  # fmt: skip
    hint = "no hooks; add a [hooks.NAME] table to config.toml (docs/events.md)"
    heads = ("hook", "type", "url", "events", "accepted", "refused", "last", "how")
    return table(heads, shown, {"url": 44, "how": 50}, hint)
