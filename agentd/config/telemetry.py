"""The `[metrics]` and `[tracing]` tables: what the daemon tells the operator's own tools.

`[metrics] enabled = true` serves `GET /metrics` (Prometheus text) on the API's port (`[api]
port`, loopback): open to loopback clients, or, with `token_env`, only to a client sending that
token as `Authorization: Bearer …` (never the web inbox's session key nor the API token).
`[tracing] enabled = true` exports OpenTelemetry traces over OTLP/HTTP protobuf (no extra library:
agentd/telemetry/otel.py); docs/observability.md shows both.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class MetricsConfig(BaseModel):
    """[metrics]: `GET /metrics` on the API's port."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: StrictBool = False
    # The NAME of the variable (or systemd credential) holding the scrape token; unset: loopback
    # clients scrape without one. Set, every scrape must send it, from anywhere.
    token_env: str | None = Field(None, pattern=ENV_NAME)


class TracingConfig(BaseModel):
    """[tracing]: OpenTelemetry traces over OTLP/HTTP (off by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: StrictBool = False
    # The collector's OTLP/HTTP traces URL (an OpenTelemetry Collector, Jaeger, Tempo…).
    endpoint: str = "http://127.0.0.1:4318/v1/traces"
    service_name: str = "agentd"
    # Model-call spans carry the model, the tokens and the purpose; the prompt text only if true.
    capture_prompts: StrictBool = False
    # Spans waiting for export at most; past it new spans are dropped (and that is logged once).
    queue_size: int = Field(2048, ge=16, le=1_000_000)
    # Seconds one export may take before it is given up (the export runs on its own thread).
    timeout_s: float = Field(5.0, gt=0, le=60)

    @field_validator("endpoint")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("endpoint must be an http:// or https:// OTLP/HTTP traces URL")
        return value
