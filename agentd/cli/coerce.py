"""Command-line values converted without pydantic when typer's result is plain: typer (0.29) turns
every value that is not a flag into its type through a pydantic TypeAdapter built on first use, and
importing pydantic and building the schemas costs a read command more CPU than typer itself.

`quicken(params)` gives each parameter of a command a converter that answers for the common
cases exactly as typer would (no value; a str; a plain decimal int within its range; a path that
reads back as typed) and hands anything else, bad input included, to typer's own converter: its
results and its error messages. A typer without these internals keeps its own converters.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typer._coercion import RuntimeParam, TypeDescriptor
from typer._param_types import coerce_cli_path

if TYPE_CHECKING:
    from typer._click import Context
    from typer.core import _TyperParameter

_DECIMAL = re.compile(r"[+-]?[0-9]+", re.ASCII)  # what int() and pydantic read alike
_TYPERS = object()  # no plain answer: typer's converter decides


@dataclasses.dataclass(frozen=True)
class QuickParam(RuntimeParam):
    """A parameter's converter: plain values here, the rest through typer's (pydantic) one. The
    base class answers a missing value (None, or () for a multiple) before asking this."""

    descriptor: TypeDescriptor

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        plain = self._plain(value, param, ctx)
        if plain is not _TYPERS:
            return plain
        param._runtime_param = None  # typer builds its own from here on
        return param.get_runtime_param().coerce(value, param=param, ctx=ctx)

    def _plain(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        d, info = self.descriptor, self.parameter_info
        if param.multiple or param.nargs != 1 or d.is_file or info.parser is not None:
            return _TYPERS
        if d.annotation is str and type(value) is str:
            return value  # typer's str adapter gives the same object back
        if d.annotation is int and not info.clamp:
            if type(value) is str and _DECIMAL.fullmatch(value):
                value = int(value)
            low, high = info.min, info.max
            if (
                type(value) is int
                and (low is None or value >= low)
                and (high is None or value <= high)
            ):
                return value
            return _TYPERS  # out of range or not decimal: typer says why
        if (
            d.annotation is Path
            and info.path_type is None
            and type(value) is str
            and os.fspath(Path(value)) == value  # its messages quote the path as typed
        ):
            return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        return _TYPERS


def quicken(params: Iterable[Any]) -> None:
    """Give each typer parameter of `params` not yet converted the quick converter."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if isinstance(descriptor, TypeDescriptor) and getattr(param, "_runtime_param", 0) is None:
            param._runtime_param = QuickParam(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
