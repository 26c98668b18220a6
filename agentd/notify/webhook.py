"""A generic webhook: the message as JSON, signed per Standard Webhooks (standardwebhooks.com).

Headers `webhook-id` (the same on every retry: receivers dedupe on it), `webhook-timestamp` (unix
seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the
secret `whsec_<base64>` read from the variable `secret_env` names.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json

import httpx

from agentd import config
from agentd.config.notify import WebhookNotify
from agentd.errors import DeliveryFailed
from agentd.models import JSON
from agentd.notify import subject


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret (a secret without the prefix is its bytes)."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret[len("whsec_") :], validate=True)
        except binascii.Error:
            raise DeliveryFailed("the webhook secret after whsec_ is not base64") from None
    return secret.encode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


async def post(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> None:
    """One POST; a 2xx is delivered, anything else raises DeliveryFailed (never the headers)."""
    try:
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client,
        ):
            response = await client.post(url, content=body, headers=headers)
    except TimeoutError:
        raise DeliveryFailed(f"no answer from {url} within {timeout_s:g}s") from None
    except httpx.HTTPError as e:
        raise DeliveryFailed(f"{url}: {type(e).__name__}: {e}") from None
    if not 200 <= response.status_code < 300:
        raise DeliveryFailed(f"{url} answered HTTP {response.status_code}")


class Webhook:
    def __init__(self, name: str, cfg: WebhookNotify) -> None:
        self.name = name
        self.cfg = cfg

    async def send(self, message: JSON, *, message_id: str, timestamp: int) -> None:
        envelope = {
            "type": f"agentd.{message.get('category', 'inbox')}",
            "timestamp": timestamp,
            "subject": subject(message),
            "data": message,
        }
        body = json.dumps(envelope, separators=(",", ":")).encode()
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
        }
        if self.cfg.secret_env is not None:
            secret = config.secret(self.cfg.secret_env)
            if secret is None:
                raise DeliveryFailed(f"${self.cfg.secret_env} (the webhook secret) is not set")
            headers["webhook-signature"] = sign(secret, message_id, timestamp, body)
        await post(self.cfg.url, body, headers, self.cfg.timeout_s)
