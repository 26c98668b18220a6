"""`--dist loadgroup` groups again under pytest 9.2: a module marked `xdist_group` (e.g.
tests/web/test_web_pages.py, whose module fixture starts a daemon and Chromium) runs on one
worker instead of building its fixture on each.

pytest-xdist 3.8 tells its scheduler a test's group by appending `@GROUP` to the test's node id
on the worker, by setting `item._nodeid`; pytest 9.2 keeps the id in `item._id` (a structured
NodeId) and no longer reads `_nodeid`, so the suffix is lost and the tests are dealt out one by
one (pytest-dev/pytest-xdist#1386, fix proposed in #1388). This hook sets the same suffix on
`_id`, first (before tests/ordering.py sorts by ids, so its recorded times match). It does
nothing outside a loadgroup worker, on a pytest that still has `_nodeid`, or when xdist's own
suffix took: remove it when xdist has the fix.
"""

from __future__ import annotations

import pytest


def group_suffix(item: pytest.Item) -> str | None:
    """`@a_b` for an item in groups a and b (as xdist names them), None when in none."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
             for m in item.iter_markers("xdist_group")}  # fmt: skip
    return "@" + "_".join(sorted(names)) if names else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2, where `_id` holds the node id
    except ImportError:  # an older pytest: xdist's own suffix takes
        return

    for item in items:
        suffix = group_suffix(item)
        current = getattr(item, "_id", None)
        if suffix and isinstance(current, NodeId) and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]
