"""A generic webhook: the message as JSON, signed per Standard Webhooks (standardwebhooks.com).

Headers `webhook-id` (the same on every retry: receivers dedupe on it), `webhook-timestamp` (unix
seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the
secret `whsec_<base64>` read from the variable `secret_env` names. A `{secret:NAME}` in the URL is
filled from the daemon's variable NAME at each delivery; errors name the URL by its host only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping

import httpx

from agentd import config
from agentd.config import SECRET_PLACEHOLDER
from agentd.config.notify import WebhookNotify
from agentd.errors import DeliveryFailed
from agentd.models import JSON
from agentd.notify import subject
from agentd.telemetry.tracing import current_traceparent
from agentd.text import url_shown, urls_shown


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


def filled(url: str) -> tuple[str, dict[str, str]]:
    """`url` with each `{secret:NAME}` filled from the daemon's variable NAME (as written: it may
    span segments), and the values by name; DeliveryFailed names a variable that is not set."""
    values: dict[str, str] = {}
    for name in SECRET_PLACEHOLDER.findall(url):
        value = config.secret(name)
        if value is None:
            raise DeliveryFailed(f"${name} (in the channel's url) is not set in the daemon's env")
        values[name] = value
    return SECRET_PLACEHOLDER.sub(lambda m: values[m.group(1)], url), values


async def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout_s: float,
    secrets: Mapping[str, str] | None = None,
) -> None:
    """One POST; a 2xx is delivered, anything else raises DeliveryFailed — naming the URL by its
    scheme and host only (a webhook's path or query is often its secret), never the headers,
    and never a value of `secrets` (name → value filled into the URL)."""
    where = url_shown(url)
    try:
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client,
        ):
            response = await client.post(url, content=body, headers=headers)
    except TimeoutError:
        raise DeliveryFailed(f"no answer from {where} within {timeout_s:g}s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        said = urls_shown(str(e).replace(url, where))
        for name, value in (secrets or {}).items():
            said = said.replace(value, f"[secret:{name}]")
        raise DeliveryFailed(f"{where}: {type(e).__name__}: {said}") from None
    if not 200 <= response.status_code < 300:
        raise DeliveryFailed(f"{where} answered HTTP {response.status_code}")


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
        if (traceparent := current_traceparent()) is not None:  # [tracing]: the notify span's
            headers["traceparent"] = traceparent
        if self.cfg.secret_env is not None:
            secret = config.secret(self.cfg.secret_env)
            if secret is None:
                raise DeliveryFailed(f"${self.cfg.secret_env} (the webhook secret) is not set")
            headers["webhook-signature"] = sign(secret, message_id, timestamp, body)
        url, secrets = filled(self.cfg.url)
        await post(url, body, headers, self.cfg.timeout_s, secrets)
