"""A request that proved itself vouches for its connection: the API's listener
(agentd/api/connections.py) puts `VOUCH` in each request's scope, and whatever checks a token, a
session's key or a hook's signature calls `vouch(scope)`; a stranger's connection gives way first."""

from __future__ import annotations

from starlette.types import Scope

VOUCH = "agentd.vouch"  # the scope's key for its connection's vouch (absent: nothing to do)


def vouch(scope: Scope) -> None:
    """The request of `scope` proved itself: its connection is kept before strangers'."""
    vouched = scope.get(VOUCH)
    if vouched is not None:
        vouched()
