"""Whether a delivery comes from the hook's sender, pure: a bearer token, a Standard Webhooks
signature (`webhook-id`, `webhook-timestamp` within the tolerance, `webhook-signature: v1,<base64
HMAC-SHA256 of "{id}.{timestamp}.{body}">`, the scheme agentd signs its own webhooks with), or
GitHub's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`. Comparisons take constant
time; a refusal says why in words that never include a secret or the body."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

MAX_SIGNATURES = 8  # a `webhook-signature` lists one per secret being rotated: a few at most


class Unverified(Exception):
    """The delivery does not prove its sender (answered 401; the reason goes to the log)."""


def bearer(headers: Mapping[str, str], token: str) -> None:
    given = headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unverified("no Bearer token")
    if not hmac.compare_digest(value.strip().encode(), token.encode()):
        raise Unverified("a Bearer token that is not the hook's")


def _key(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret (a secret without the prefix is its bytes)."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret[len("whsec_") :], validate=True)
        except binascii.Error:
            raise Unverified("the hook's secret after whsec_ is not base64 (fix it)") from None
    return secret.encode()


def standard(
    headers: Mapping[str, str], body: bytes, secret: str, now: float, tolerance_s: float
) -> str:
    """The delivery's `webhook-id` once its signature and timestamp hold."""
    message_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    signatures = headers.get("webhook-signature", "")
    if not message_id or not stamp or not signatures:
        raise Unverified("no webhook-id, webhook-timestamp or webhook-signature header")
    if len(message_id) > 200:
        raise Unverified("a webhook-id over 200 characters")
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:  # int("²") raises
        raise Unverified("a webhook-timestamp that is not unix seconds")
    if abs(now - int(stamp)) > tolerance_s:
        raise Unverified(f"a webhook-timestamp more than {tolerance_s:g} s from now (a replay?)")
    signed = f"{message_id}.{stamp}.".encode() + body
    expected = base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest())
    for given in signatures.split(" ")[:MAX_SIGNATURES]:
        version, _, value = given.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            return message_id
    raise Unverified("a webhook-signature that does not match the body")


def github(headers: Mapping[str, str], body: bytes, secret: str) -> str:
    """The delivery's `X-GitHub-Delivery` once `X-Hub-Signature-256` holds."""
    given = headers.get("x-hub-signature-256", "")
    if not given.startswith("sha256="):
        raise Unverified("no X-Hub-Signature-256 header")
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unverified("an X-Hub-Signature-256 that does not match the body")
    delivery = headers.get("x-github-delivery", "")
    if not delivery or len(delivery) > 200:
        raise Unverified("no X-GitHub-Delivery header")
    return delivery
