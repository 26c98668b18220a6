"""`agentd doctor`'s checks of what reaches the operator: each notification channel (its secret,
its latest delivery, an unsigned webhook) and the web inbox (is it served where the config says,
asked of the running daemon over its socket; is the token sound). A secret this shell lacks is
asked of the running daemon (yes or no, never the value): doctor is often run from a login shell
that lacks the service's environment, and that is not what fails deliveries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentd import config
from agentd.config import SECRET_PLACEHOLDER, Config, Paths
from agentd.config.notify import NotifierConfig
from agentd.db import poke
from agentd.db.sqlite import schema
from agentd.errors import AgentdError
from agentd.operator import control
from agentd.operator import health as operator_health
from agentd.operator import home as operator_home
from agentd.text import urls_shown
from agentd.views.records import Check

Sees = Mapping[str, bool | None] | None  # the daemon's yes/no per secret name; None: not asked
FROM_DAEMON = "cannot check from here; the daemon sees it"


def daemon_sees(paths: Paths, cfg: Config, pid: int | None) -> Sees:
    """Which of the config's secrets missing here the running daemon's environment holds;
    None when no daemon runs or it cannot be asked."""
    missing = [n for n in control.secret_names(cfg) if config.secret(n) is None]
    if pid is None or not missing:
        return None
    return control.daemon_sees(paths, missing)


def unseen_secret(env: str, sees: Sees) -> str | None:
    """None when the secret `env` is set here or the daemon sees it; else what is missing."""
    if config.secret(env) is not None:
        return None
    seen = None if sees is None else sees.get(env)
    if seen is True:
        return None
    if seen is False:
        return (f"${env} is set neither here nor in the running daemon's environment: set it "
                "where the daemon starts (systemd: Environment=, EnvironmentFile= or "
                "LoadCredential=), then restart it")  # fmt: skip
    return f"${env} is not set in this environment"


def seen_where(env: str) -> str:
    """How a secret that is not missing was found: here, or only by the daemon."""
    return "is set" if config.secret(env) is not None else f"is not set here: {FROM_DAEMON}"


def check_notify(
    paths: Paths, cfg: Config, sees: Sees = None, *, readable: bool | None = None
) -> list[Check]:
    """Each [notify.NAME]: its secret is set (here, or in the running daemon), and its latest
    delivery did not fail; an unsigned webhook is a warning (it delivers, but nothing proves
    the messages are agentd's). `readable`: whether the home's database can be read (default:
    its SQLite file exists)."""
    health: dict[str, Any] = {}
    if cfg.notify and (paths.db.exists() if readable is None else readable):
        try:
            store = operator_home.inspect_store(paths.db)
            try:
                # the outbox exists: in every PostgreSQL schema, in SQLite's from version 4
                if store.backend.shared or store.read(schema.version) >= 4:
                    health = operator_health.channel_health(store)
            finally:
                store.close()
        except AgentdError:
            pass  # the database check reports it
    checks = []
    for name, n in cfg.notify.items():
        names = _secret_names(n)
        unset = [why for env in names if (why := unseen_secret(env, sees)) is not None]
        elsewhere = [] if unset else [f"${env}" for env in names if config.secret(env) is None]
        there = f"; {', '.join(elsewhere)}: {FROM_DAEMON}" if elsewhere else ""
        h = health.get(name, {})
        if unset:
            checks.append(Check(f"notify {name}", False, f"{n.type}: {unset[0]}"))
        elif h.get("failing"):
            # Errors older code kept may quote the whole URL: shown by its host here.
            msg = (
                f"{n.type}: failing, {h['pending']} message(s) waiting to retry: "
                f"{urls_shown(str(h['error']))}"
                f"; fix the receiver or the config, the outbox retries with backoff{there}"
            )
            checks.append(Check(f"notify {name}", False, msg))
        else:
            sent = "never used yet" if not h else f"{h['pending']} waiting, last send ok"
            gave_up = f"; {h['failed']} given up" if h.get("failed") else ""
            if n.type == "webhook" and n.secret_env is None:  # a warning: it still delivers
                msg = (
                    f"webhook: {sent}{gave_up}; unsigned: receivers cannot tell its messages "
                    f'from forged ones; set secret_env = "NAME" in [notify.{name}], the '
                    f"variable holding a whsec_<base64> secret{there}"
                )
                checks.append(Check(f"notify {name}", False, msg, required=False))
                continue
            checks.append(Check(f"notify {name}", True, f"{n.type}: {sent}{gave_up}{there}"))
    return checks


def _secret_names(n: NotifierConfig) -> list[str]:
    """The daemon's variables a channel reads: its secret, token or password, and each
    `{secret:NAME}` in its url (a webhook's or an ntfy server's)."""
    named = [getattr(n, key, None) for key in ("secret_env", "token_env", "password_env")]
    in_url = SECRET_PLACEHOLDER.findall(getattr(n, "url", "") or "")
    return [env for env in named if env is not None] + in_url


def web_served(paths: Paths, pid: int | None) -> Any:
    """What the running daemon serves (`{"pid", "port", "web", "socket"}`, asked over its unix
    socket), or None: no daemon, no token yet, or no answer."""
    if pid is None or not paths.api_token.exists():
        return None
    return poke.ask(paths.api_sock, "/api/daemon", paths.api_token.read_text().strip())


def check_web(paths: Paths, cfg: Config, pid: int | None) -> list[Check]:
    """With `[web] enabled`, does the running daemon serve the pages? A port another program
    holds is a failure: the login URL would hand the token to that program."""
    if not cfg.web.enabled:
        return []
    if paths.api_token.exists() and not operator_home.strong_token(
        paths.api_token.read_text().strip()
    ):
        return [Check("web inbox", False, f"{paths.api_token} holds no token or one too short to "
                      "be safe: run `agentd web --rotate` to write a new one")]  # fmt: skip
    if pid is None:
        return []
    want = cfg.web.port(cfg.api)
    served = web_served(paths, pid)
    if not isinstance(served, dict):
        return [Check("web inbox", False, "the daemon does not answer on its socket "
                      f"{paths.api_sock}; restart it", False)]  # fmt: skip
    if served.get("web") and served.get("port") is not None:
        note = "" if served["port"] == want else f" (the config says {want}: restart to apply)"
        return [Check("web inbox", True, f"served on 127.0.0.1:{served['port']}{note}")]
    failed = served.get("port_failed")
    why = (
        f"could not listen on 127.0.0.1:{failed} (another program holds the port? see the "
        "daemon's log: api.port_failed); free it or set [api] port = N, then restart `agentd serve`"
        if failed
        else "enabled after the daemon started; restart `agentd serve`"
    )
    return [Check("web inbox", False, f"not served: {why}")]
