"""tests/ordering.py: the longest modules first by the last run's times, a module's own order kept,
nothing moved without times, and only the controller (not an xdist worker) keeps the times."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests import ordering


class Cache:
    def __init__(self, value: dict[str, float] | None = None) -> None:
        self.values: dict[str, Any] = {} if value is None else {ordering.KEY: value}

    def get(self, key: str, default: Any) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


IDS = ["a.py::t1", "a.py::t2", "b.py::t1", "b.py::t2", "c.py::t1"]


def order(timed: dict[str, float] | None) -> list[str]:
    items: Any = [SimpleNamespace(nodeid=nodeid) for nodeid in IDS]
    ordering.pytest_collection_modifyitems(SimpleNamespace(cache=Cache(timed)), items)  # type: ignore[arg-type]
    return [item.nodeid for item in items]


def test_the_longest_module_runs_first_and_keeps_its_own_order() -> None:
    # b's tests took 9 s together, a's 5 s: b first, its t1 still before its t2; c untimed last.
    timed = {"a.py::t1": 1.0, "a.py::t2": 4.0, "b.py::t1": 0.5, "b.py::t2": 8.5}
    assert order(timed) == ["b.py::t1", "b.py::t2", "a.py::t1", "a.py::t2", "c.py::t1"]


def test_without_times_nothing_moves() -> None:
    assert order(None) == IDS
    assert order({}) == IDS


def test_the_controller_keeps_each_tests_time_and_a_worker_does_not(monkeypatch: Any) -> None:
    monkeypatch.setattr(ordering, "_seconds", {})
    for phase in (0.25, 2.0, 0.25):  # set-up, call, teardown
        ordering.pytest_runtest_logreport(SimpleNamespace(nodeid="a.py::t1", duration=phase))  # type: ignore[arg-type]
    worker = SimpleNamespace(config=SimpleNamespace(cache=Cache(), workerinput={}))
    ordering.pytest_sessionfinish(worker)  # type: ignore[arg-type]
    assert worker.config.cache.values == {}
    controller = SimpleNamespace(config=SimpleNamespace(cache=Cache({"b.py::t1": 3.0})))
    ordering.pytest_sessionfinish(controller)  # type: ignore[arg-type]
    assert controller.config.cache.values[ordering.KEY] == {"b.py::t1": 3.0, "a.py::t1": 2.5}
