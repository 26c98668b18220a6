"""Text made inert, JSON made canonical and URLs shown by their host: what every surface, the log,
the notifications and the prompts use before a model's, the world's, a person's or the config's
text reaches a terminal, a page, a message or a model.

Pure functions; the ground: imports only agentd.models.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import re
import urllib.parse
from datetime import UTC, datetime
from typing import Any

from agentd.models import Run, Step, StepKind

# ── neutralising text from models and the world ──────────────────────────────────────────────

# Printable by Python's measure, yet invisible: fillers, joiners and selectors that hide or smuggle
# text. Everything `str.isprintable()` rejects (C0/C1 controls, DEL, bidi overrides and isolates,
# zero-width and other format characters, line separators, unassigned code points) is escaped too.
_INVISIBLE = re.compile(
    r"[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0\U000e0100-\U000e01ef]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Starts every further line of a multi-line written text, so that line cannot pose as a field.
CONTINUATION = "  │ "


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _escape_line(text: str, keep: str) -> str:
    if text.isprintable() and not _INVISIBLE.search(text):
        return text  # the common case, checked in C
    return "".join(
        ch if ch in keep or (ch.isprintable() and not _INVISIBLE.match(ch)) else _escape(ch)
        for ch in text
    )


def safe(text: object, *, multiline: bool = False, continuation: str = CONTINUATION) -> str:
    """`text` as it may be shown on a terminal: control, bidi and invisible characters become
    visible escapes (ESC → `\\x1b`, U+202E → `\\u202e`), so nothing a model or the world wrote can
    move the cursor, clear the screen, reorder what is shown or hide characters.

    Newlines become `\\n` unless `multiline`; then they are kept (with tabs), and each further line
    starts with `continuation`, so a written line never starts where a field or a heading would.
    """
    text = "" if text is None else str(text)
    if not multiline:
        return _escape_line(text, "")
    lines = text.replace("\r\n", "\n").split("\n")
    return ("\n" + continuation).join(_escape_line(line, "\t") for line in lines)


def screen(text: str) -> str:
    """The last pass over a whole rendered view or message: keeps its lines, escapes the rest."""
    return safe(text, multiline=True, continuation="")


def _ascii_json(value: Any, **options: Any) -> str:
    """JSON with every character outside printable ASCII escaped (`\\u202e`, DEL too); decoders
    read the same text back."""
    return json.dumps(jsonable(value), ensure_ascii=True, **options)


def canonical(value: Any) -> str:
    """Arguments as shown in the authoritative block: sorted keys, one key a line, everything
    outside printable ASCII escaped, so a look-alike letter shows as `\\u0430`."""
    return _ascii_json(value, indent=2, sort_keys=True)


def iso(dt: datetime) -> str:
    """`2026-03-01T17:00:00Z` (fractions of a second kept): what every --json time looks like."""
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ── JSON and one-line cells ──────────────────────────────────────────────────────────────────


def _wait_json(wait: Any) -> Any:
    """A wait's `until` (unix seconds inside) as ISO 8601, like every other --json time."""
    if isinstance(wait, dict) and isinstance(wait.get("until"), int | float):
        with contextlib.suppress(ValueError, OverflowError, OSError):
            return {**wait, "until": iso(datetime.fromtimestamp(wait["until"], UTC))}
    return wait


def jsonable(value: Any) -> Any:
    """Dataclasses as objects, datetimes as `2026-03-01T17:00:00Z` (a run's wait time too),
    everything else as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, Run):
            out["wait"] = _wait_json(out["wait"])
        elif isinstance(value, Step) and value.kind == StepKind.WAIT:
            out["data"] = _wait_json(out["data"])
        return out
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """--json output: every value in full; control, bidi and other non-ASCII characters escaped."""
    return _ascii_json(value, indent=2)


def compact(value: Any) -> str:
    """One-line JSON for arguments and results inside a table cell."""
    return json.dumps(jsonable(value), separators=(",", ":"), ensure_ascii=False, default=str)


def single_line(value: object) -> str:
    """Whitespace (newlines too) collapsed to single spaces, then neutralised."""
    return safe(" ".join(str("" if value is None else value).split()))


def one_line(value: object, width: int = 60) -> str:
    """Whitespace collapsed to single spaces, neutralised, cut at a word to at most `width`
    characters with an … (a table's title column: "Keep checkout…", not "Keep checko…")."""
    text = single_line(value)
    if len(text) <= width:
        return text
    return cut_at_word(text, width) if width > 1 else text[: max(width - 1, 0)] + "…"


TITLE_CHARS = 200  # an inbox item's title; longer text is cut at a word (its body keeps it all)


def cut_at_word(value: object, limit: int = TITLE_CHARS) -> str:
    """`value` as it is when it fits in `limit` characters, else cut at the last space before
    the limit with an … marking the cut (inside a word only when the text has no space in the
    second half of the room: a URL, a hash)."""
    text = str(value)
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:-") + "…"


# ── URLs as shown: scheme and host, never the path or query a token may sit in ──────────────

# Where a URL ends inside a message; the punctuation that closes a sentence is not part of it.
_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)
_CLOSING = ".,:;!?)]}"
# `{secret:NAME}` and `{param}`: named, not written, so no credential.
_PLACEHOLDER = re.compile(r"\{(?:secret:)?[A-Za-z_][A-Za-z0-9_]*\}")
# Query keys that name a credential (their words, split at -, _ and case changes).
_CREDENTIAL_WORDS = frozenset(
    {"token", "key", "secret", "sig", "signature", "auth", "authorization", "password",
     "passwd", "pwd", "apikey", "credential", "credentials"}
)  # fmt: skip
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-.~+=]+")


def url_shown(url: str) -> str:
    """`url` as agentd shows it to a model, a log, a notification's error or `status`: its
    scheme and host (and port), then `/…` when a path or query followed — never the path, the
    query or a user name and password, where webhook URLs carry their secret."""
    parts = urllib.parse.urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    if not parts.scheme or not host:
        return "(a URL)"
    rest = "/…" if parts.path not in ("", "/") or parts.query or parts.fragment else parts.path
    return f"{parts.scheme}://{host}{rest}"


def urls_shown(text: str) -> str:
    """`text` with every http(s) URL in it as `url_shown` shows it (an error message that
    quotes the URL it failed on keeps its host, not the secret in its path)."""

    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        kept = url.rstrip(_CLOSING)
        return url_shown(kept) + url[len(kept) :]

    return _URL_IN_TEXT.sub(one, text)


def url_credentials(url: str) -> list[str]:
    """What in `url` looks like a credential written out, each said in a few words (never the
    value): a user name and password, a query key that names one (token, key, sig, …), a long
    random-looking path segment or query value. Placeholders (`{secret:NAME}`, `{param}`) are
    names, not values, and pass."""
    parts = urllib.parse.urlsplit(_PLACEHOLDER.sub("", url.strip()))
    found = []
    if "@" in parts.netloc:
        found.append("a user name and password before the host")
    # A segment's pieces too: Telegram's "bot<id>:<secret>", a ";jsessionid=…" parameter.
    for segment in parts.path.split("/"):
        pieces = re.split(r"[:;=,]", urllib.parse.unquote(segment))
        if any(_random_looking(piece) for piece in pieces):
            found.append(f"a random-looking path segment of {len(segment)} characters")
    for where, text in (("query", parts.query), ("fragment", parts.fragment)):
        for key, value in urllib.parse.parse_qsl(text, keep_blank_values=True):
            if value and _credential_word(key):
                found.append(f"the {where}'s {key!r}")
            elif _random_looking(value):
                found.append(f"a random-looking value of the {where}'s {key!r}")
            elif not value and _random_looking(key):  # "#abc…" alone: the key is the value
                found.append(f"a random-looking {where}")
    return found


def _credential_word(key: str) -> bool:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)  # accessToken → access Token
    words = [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]
    return any(w in _CREDENTIAL_WORDS for w in words) or key.lower() in _CREDENTIAL_WORDS


def _random_looking(text: str) -> bool:
    """Long, of token characters, and letters and digits interleaved (a key, a hash, a UUID)
    — or, without digits, long and switching case all along — rather than a word, a slug, a
    camelCase name, a date or a number."""
    if len(text) < 16 or not _TOKEN_CHARS.fullmatch(text):
        return False
    kinds = "".join("d" if c.isdigit() else "a" if c.isalpha() else "" for c in text)
    if "d" in kinds and "a" in kinds:
        return _switches(kinds) >= 3
    cases = "".join("u" if c.isupper() else "l" for c in text if c.isalpha())
    return len(text) >= 32 and _switches(cases) >= len(text) / 3


def _switches(kinds: str) -> int:
    return sum(a != b for a, b in itertools.pairwise(kinds))
