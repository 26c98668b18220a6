"""The CLI's quick converters answer as typer's own (pydantic) ones: the same value, or the same
error message, for every kind of parameter the commands declare."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
import typer
from typer import _click

import agentd.cli
from agentd.cli.coerce import QuickParam, quicken
from agentd.cli.root import app

VALUES = ["12", "007", "-3", "+4", " 5", "1_000", "12.0", "abc", "", "0", "a//b", "~/x", "/tmp",
          "active", "bogus", 20, 0, True]  # fmt: skip


def _params() -> list[Any]:
    for module in pkgutil.iter_modules(agentd.cli.__path__):
        importlib.import_module(f"agentd.cli.{module.name}")
    found: list[Any] = []

    def walk(command: Any) -> None:
        found.extend(p for p in command.params if hasattr(p, "type_descriptor"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return found


def _outcome(param: Any, value: Any, ctx: Any) -> Any:
    try:
        return ("value", param.get_runtime_param().coerce(value, param=param, ctx=ctx))
    except _click.exceptions.BadParameter as e:
        return ("error", e.format_message())


def test_quick_converters_answer_as_typers_own() -> None:
    params = _params()
    assert len(params) > 50
    ctx = _click.Context(typer.main.get_command(app))
    compared = 0
    for param in params:
        for value in VALUES:
            param._runtime_param = None  # typer's own
            expected = _outcome(param, value, ctx)
            param._runtime_param = None
            quicken([param])
            assert isinstance(param._runtime_param, QuickParam)
            assert _outcome(param, value, ctx) == expected, (param.name, value)
            compared += 1
    assert compared > 50 * len(VALUES) - 1


@pytest.mark.parametrize("value", ["12", "a//b", "abc"])
def test_quick_converter_of_a_plain_value_needs_no_adapter(value: str) -> None:
    param = next(p for p in typer.main.get_command(app).params if p.name == "home")  # --home
    param._runtime_param = None
    quicken([param])
    quick = param._runtime_param
    ctx = _click.Context(typer.main.get_command(app))
    param.get_runtime_param().coerce(value, param=param, ctx=ctx)

    # a path that reads back as typed stays with the quick converter; one that does not goes to
    # typer's (which then stays)
    assert (param._runtime_param is quick) == (value != "a//b")
