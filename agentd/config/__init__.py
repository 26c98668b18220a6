"""The config file (`$AGENTD_HOME/config.toml`) validated at the edge, and where state lives.
One module per table family (actions, sources, models, notify, api, build, agents), the file as a
whole (file: [daemon], [mcp], loading, file:line errors) and the home and environment (home); this
package re-exports what callers use. May import the ground only.

Only config/home.py reads the environment. A bad file raises ConfigError naming the file, the line
and the key, and what to fix. Secrets are named by environment variable (`api_key_env`, an action's
`secret_env` and `{secret:NAME}`), never written here, and read only through `secret()`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentd.config.home import (
    CONFIG_NAME as CONFIG_NAME,
)
from agentd.config.home import (
    DB_NAME as DB_NAME,
)
from agentd.config.home import (
    SCRUBBED_ENV as SCRUBBED_ENV,
)
from agentd.config.home import (
    Paths as Paths,
)
from agentd.config.home import (
    base_env as base_env,
)
from agentd.config.home import (
    default_home as default_home,
)
from agentd.config.home import (
    journal_stream as journal_stream,
)
from agentd.config.home import (
    log_format as log_format,
)
from agentd.config.home import (
    notify_socket as notify_socket,
)
from agentd.config.home import (
    secret as secret,
)
from agentd.config.home import (
    watchdog_interval_s as watchdog_interval_s,
)

if TYPE_CHECKING:
    from agentd.config.actions import (
        PARAM_PLACEHOLDER as PARAM_PLACEHOLDER,
    )
    from agentd.config.actions import (
        SECRET_PLACEHOLDER as SECRET_PLACEHOLDER,
    )
    from agentd.config.actions import (
        ActionConfig as ActionConfig,
    )
    from agentd.config.actions import (
        BuiltinAction as BuiltinAction,
    )
    from agentd.config.actions import (
        CommandAction as CommandAction,
    )
    from agentd.config.actions import (
        HttpAction as HttpAction,
    )
    from agentd.config.actions import (
        McpServerRef as McpServerRef,
    )
    from agentd.config.actions import (
        McpToolAction as McpToolAction,
    )
    from agentd.config.actions import (
        Param as Param,
    )
    from agentd.config.actions import (
        schema_mismatch as schema_mismatch,
    )
    from agentd.config.actions import (
        whole_match as whole_match,
    )
    from agentd.config.agents import (
        AgentConfig as AgentConfig,
    )
    from agentd.config.agents import (
        Budget as Budget,
    )
    from agentd.config.agents import (
        Checkin as Checkin,
    )
    from agentd.config.agents import (
        ExpiryRule as ExpiryRule,
    )
    from agentd.config.agents import (
        Limits as Limits,
    )
    from agentd.config.agents import (
        Policy as Policy,
    )
    from agentd.config.api import (
        ApiConfig as ApiConfig,
    )
    from agentd.config.api import (
        WebConfig as WebConfig,
    )
    from agentd.config.build import (
        BuildConfig as BuildConfig,
    )
    from agentd.config.file import (
        BUILTIN_ACTIONS as BUILTIN_ACTIONS,
    )
    from agentd.config.file import (
        Config as Config,
    )
    from agentd.config.file import (
        DaemonConfig as DaemonConfig,
    )
    from agentd.config.file import (
        McpConfig as McpConfig,
    )
    from agentd.config.file import (
        load as load,
    )
    from agentd.config.file import (
        parse as parse,
    )
    from agentd.config.mail import (
        ImapSource as ImapSource,
    )
    from agentd.config.mail import (
        MailFlagAction as MailFlagAction,
    )
    from agentd.config.mail import (
        MailMoveAction as MailMoveAction,
    )
    from agentd.config.mail import (
        MailReplyAction as MailReplyAction,
    )
    from agentd.config.models import (
        AnthropicModel as AnthropicModel,
    )
    from agentd.config.models import (
        ModelConfig as ModelConfig,
    )
    from agentd.config.models import (
        OpenAIModel as OpenAIModel,
    )
    from agentd.config.models import (
        OtherModel as OtherModel,
    )
    from agentd.config.models import (
        Price as Price,
    )
    from agentd.config.models import (
        RunbookModel as RunbookModel,
    )
    from agentd.config.models import (
        ScriptedModel as ScriptedModel,
    )
    from agentd.config.models import (
        TemplateModel as TemplateModel,
    )
    from agentd.config.models import (
        call_timeout_s as call_timeout_s,
    )
    from agentd.config.promql import (
        PrometheusSource as PrometheusSource,
    )
    from agentd.config.promql import (
        PromQuery as PromQuery,
    )
    from agentd.config.sources import (
        CHECK_FAILED as CHECK_FAILED,
    )
    from agentd.config.sources import (
        HEALTHY as HEALTHY,
    )
    from agentd.config.sources import (
        SOURCE_STATES as SOURCE_STATES,
    )
    from agentd.config.sources import (
        UNHEALTHY as UNHEALTHY,
    )
    from agentd.config.sources import (
        CommandSource as CommandSource,
    )
    from agentd.config.sources import (
        FileTailSource as FileTailSource,
    )
    from agentd.config.sources import (
        HttpSource as HttpSource,
    )
    from agentd.config.sources import (
        McpSource as McpSource,
    )
    from agentd.config.sources import (
        SourceConfig as SourceConfig,
    )
    from agentd.config.sources import (
        Watch as Watch,
    )
    from agentd.config.sources import (
        http_url as http_url,
    )
    from agentd.config.telemetry import (
        MetricsConfig as MetricsConfig,
    )
    from agentd.config.telemetry import (
        TracingConfig as TracingConfig,
    )

# The tables' models load when a caller first asks for one of their names, not with the package:
# pydantic builds each model as its module is imported, which costs a command that only needs
# `Paths` (the home's files) more CPU than importing typer. Keep in step with the imports above.
_LAZY = {
    "actions": "PARAM_PLACEHOLDER SECRET_PLACEHOLDER ActionConfig BuiltinAction CommandAction "
    "HttpAction McpServerRef McpToolAction Param schema_mismatch whole_match",
    "agents": "AgentConfig Budget Checkin ExpiryRule Limits Policy",
    "api": "ApiConfig WebConfig",
    "build": "BuildConfig",
    "telemetry": "MetricsConfig TracingConfig",
    "promql": "PrometheusSource PromQuery",
    "mail": "ImapSource MailFlagAction MailMoveAction MailReplyAction",
    "file": "BUILTIN_ACTIONS Config DaemonConfig McpConfig load parse",
    "models": "AnthropicModel ModelConfig OpenAIModel OtherModel Price RunbookModel ScriptedModel "
    "TemplateModel call_timeout_s",
    "sources": "CHECK_FAILED HEALTHY SOURCE_STATES UNHEALTHY CommandSource FileTailSource HttpSource "
    "McpSource SourceConfig Watch http_url",
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names.split()}


def __getattr__(name: str) -> object:
    """A table family's name, imported from its module on first use (PEP 562)."""
    module = _MODULE_OF.get(name)
    if module is None:  # a submodule (`from agentd.config import notify`) is imported after this
        raise AttributeError(f"module 'agentd.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"agentd.config.{module}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})
