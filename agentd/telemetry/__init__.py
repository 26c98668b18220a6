"""The operator's own tools: Prometheus metrics and OpenTelemetry traces, which the loops, the harness
and the store report to through small functions. The only importer of prometheus_client and opentelemetry."""
