"""Inbound webhooks (`[hooks.NAME]`, `POST /hooks/NAME` on the `[api] port`), a surface beside the
API: authenticate, bound and parse a sender's request, then record its events through the
operator's use case (agentd/operator/events.py). May import the web's body reader and below."""
