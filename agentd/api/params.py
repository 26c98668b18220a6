"""The `/api` lists' `?after=ID&limit=N`: ASCII digits of a size the store's signed 64-bit
integer holds (agentd/web/ids.py, as the web pages read them) — '²' (which `isdigit` accepts and
`int` refuses) and 30 digits were a 500 from the store. Ids in paths: `{name:id}` (the same module)."""

from __future__ import annotations

from starlette.requests import Request

from agentd.web import ids


def paging(request: Request) -> tuple[int | None, int | None] | None:
    """(after, limit) from `?after=ID&limit=N` (None: neither given, the whole list as before);
    ValueError saying which is wrong."""
    got = {k: request.query_params.get(k) for k in ("after", "limit")}
    if got["after"] is None and got["limit"] is None:
        return None
    out: dict[str, int | None] = {}
    for key, value in got.items():
        if value is not None and not (ids.number(value) and (key == "after" or int(value) > 0)):
            raise ValueError(f"{key}={value[:20]!r}: give a whole number of at most 18 digits "
                             "(limit at least 1), e.g. ?limit=50&after=120")  # fmt: skip
        out[key] = None if value is None else int(value)
    return out["after"], out["limit"]
