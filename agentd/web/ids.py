"""Ids as the surfaces read them from addresses (`?after=`, `?goal=`, a bulk form's ticks, `{name:id}`
in a path): ASCII digits of a size the store's signed 64-bit integer holds — '²' (which `isdigit`
accepts and `int` refuses) and 30 digits were a 500 from the store. The web pages and `/api` read
them here; importing this module registers the `id` path convertor before any route compiles."""

from __future__ import annotations

from starlette.convertors import IntegerConvertor, register_url_convertor


def number(text: str) -> bool:
    """ASCII digits of an id the store holds (a signed 64-bit integer): `isdigit` alone also
    says yes to '²', which `int` refuses, and to '٣', which it reads."""
    return text.isascii() and text.isdigit() and len(text) < 19


class _Id(IntegerConvertor):
    """`{name:id}` in a route's path (the pages' and `/api`'s): an id `number` takes — a longer
    one matches no route (not found), not the store's integer overflow (a 500)."""

    regex = "[0-9]{1,18}"


register_url_convertor("id", _Id())
