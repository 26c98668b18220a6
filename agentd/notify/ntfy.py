"""An ntfy push (ntfy.sh or a self-hosted server): a JSON publish to the server's root URL with
topic, title, message, priority 1–5, tags and a click URL to the web inbox item. As a webhook's, the
server URL may hold `{secret:NAME}`, filled at each delivery."""

from __future__ import annotations

import json

from agentd import config
from agentd.config.notify import NtfyNotify
from agentd.errors import DeliveryFailed
from agentd.models import JSON
from agentd.notify import PRIORITY_LEVEL, subject, text
from agentd.notify.webhook import filled, post
from agentd.text import cut_at_word

TAGS = {
    "approval": "lock",
    "question": "question",
    "nudge": "bulb",
    "notice": "memo",
    "failure": "x",
}


class Ntfy:
    def __init__(self, name: str, cfg: NtfyNotify) -> None:
        self.name = name
        self.cfg = cfg

    async def send(self, message: JSON, *, message_id: str, timestamp: int) -> None:
        tags = ["agentd", TAGS.get(str(message.get("category")), "bell")]
        if message.get("escalation"):
            tags.append("rotating_light")
        payload: JSON = {
            "topic": self.cfg.topic,
            "title": cut_at_word(subject(message), 250),
            "message": text(message)[:3500],
            "priority": PRIORITY_LEVEL.get(str(message.get("priority")), 3),
            "tags": tags,
        }
        if message.get("url"):
            payload["click"] = message["url"]
        headers = {"content-type": "application/json", "x-agentd-id": message_id}
        if self.cfg.token_env is not None:
            token = config.secret(self.cfg.token_env)
            if token is None:
                raise DeliveryFailed(f"${self.cfg.token_env} (the ntfy token) is not set")
            headers["authorization"] = f"Bearer {token}"
        url, secrets = filled(self.cfg.url.rstrip("/") + "/")
        await post(url, json.dumps(payload).encode(), headers, self.cfg.timeout_s, secrets)
