"""`agentd doctor`'s look at the URLs in the config (actions, sources, notification channels,
models): one that seems to hold a credential written out is a warning naming where it is, what
looks like one (never its value) and how to name the secret instead, wherever agentd can fill it.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentd.config import Config, HttpAction, HttpSource, McpServerRef
from agentd.config.notify import NtfyNotify, WebhookNotify
from agentd.text import url_credentials, url_shown
from agentd.views.records import Check

# How to name a secret instead of writing it, by where the URL is.
PLACEHOLDER = (
    "move the credential into a variable and write {secret:NAME} in its place: agentd fills it "
    "in when it sends, from the daemon's environment (or a systemd credential NAME)"
)
BEARER = 'remove it and name the variable holding the token in token_env = "NAME" (a bearer token)'
API_KEY = 'remove it and name the variable holding the key in api_key_env = "NAME"'
AS_WRITTEN = (
    "a source's url is sent as written ({secret:NAME} is filled only in http actions and "
    "webhooks): prefer an endpoint that needs no credential, and keep config.toml private "
    "(chmod 600)"
)


def check_urls(cfg: Config) -> list[Check]:
    """A warning for each URL of the config that seems to hold a credential."""
    checks = []
    for where, label, url, hint in _urls(cfg):
        found = url_credentials(url)
        if found:
            shown = url_shown(url) if label is None else f"url {label!r} ({url_shown(url)})"
            msg = f"{shown} seems to hold a credential written out ({'; '.join(found)}); {hint}"
            checks.append(Check(f"url {where}", False, msg, False))
    return checks


def _urls(cfg: Config) -> Iterator[tuple[str, str | None, str, str]]:
    """(where, its label if it has several, url, how to name its secret) for every URL."""
    for name, action in cfg.actions.items():
        if isinstance(action, HttpAction):
            for label, template in action.labels.items():
                yield f"action {name}", label, template, PLACEHOLDER
        elif isinstance(action, McpServerRef) and action.url is not None:
            yield f"action {name}", None, action.url, BEARER
    for name, source in cfg.sources.items():
        if isinstance(source, HttpSource):
            yield f"source {name}", None, source.url, AS_WRITTEN
        elif isinstance(source, McpServerRef) and source.url is not None:
            yield f"source {name}", None, source.url, BEARER
    for name, channel in cfg.notify.items():
        if isinstance(channel, WebhookNotify):
            yield f"notify {name}", None, channel.url, PLACEHOLDER
        elif isinstance(channel, NtfyNotify):
            yield f"notify {name}", None, channel.url, BEARER
    for name, model in cfg.models.items():
        base_url = getattr(model, "base_url", None)
        if isinstance(base_url, str):
            yield f"model {name}", None, base_url, API_KEY
