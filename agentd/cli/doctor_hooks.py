"""`doctor` on the inbound hooks: each `[hooks.NAME]` has its token or secret set (here, or in
the running daemon's environment), is served (an `[api] port`), and what to configure on the
sender's side — the Alertmanager receiver, GitHub's settings, a curl line — printed in full."""

from __future__ import annotations

from agentd.cli.doctor_reach import Sees, unseen_secret
from agentd.config import Config
from agentd.views import hooks as hook_views
from agentd.views.records import Check


def check_hooks(cfg: Config, sees: Sees) -> list[Check]:
    checks = []
    port = cfg.api.listen_port(cfg.web)
    for name, hook in sorted(cfg.hooks.items()):
        label = f"hook {name}"
        unset = [why for env in hook.secret_names() if (why := unseen_secret(env, sees))]
        if unset:  # every delivery would be refused (503) until it is set
            checks.append(Check(label, False, f"{hook.type}: {unset[0]}"))
            continue
        url = hook_views.url_of(port, name)
        if url is None:
            msg = "not served: set [api] port (the hooks share the API's loopback port)"
            checks.append(Check(label, False, f"{hook.type}: {msg}"))
            continue
        how = hook_views.snippet(name, hook, url)
        checks.append(Check(label, True, f"{hook.type} at {url}; on the sender's side:\n{how}"))
    return checks
