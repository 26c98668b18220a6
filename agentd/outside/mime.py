"""A mail message as bounded, untrusted data: headers, a plain-text excerpt, attachment names.

The input is already cut (the IMAP fetch reads only a message's first bytes); here the parse is
bounded too: at most MAX_PARTS parts are walked, each text part decoded to at most a few times the
excerpt, attachments are named and never decoded (a zip bomb is never opened), HTML becomes text,
and any error — malformed MIME, an 8-bit header, a bad charset — is recorded in `defects` with
what could be read. Nothing here raises.
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import Message
from email.utils import getaddresses
from html.parser import HTMLParser

from agentd.models import JSON

MAX_PARTS = 100  # parts walked; a 10,000-part multipart is recorded as cut here
MAX_HEADER_CHARS = 500  # one header's value
MAX_ADDRESSES = 50
MAX_ATTACHMENTS = 20


def summarize(raw: bytes, *, cut: bool, excerpt_chars: int) -> JSON:
    """From, To, Cc, Reply-To, Subject, Date, Message-ID, In-Reply-To, a plain-text excerpt and
    the attachments' names and types; `cut` says the message was longer than what was read."""
    defects: list[str] = []
    try:
        msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    except Exception as e:  # the stdlib parser is lenient; anything left is recorded
        return {"defects": [f"unparseable: {type(e).__name__}"], "excerpt": "", "cut": cut}
    out: JSON = {k.lower().replace("-", "_"): _header(msg, k, defects) for k in _HEADERS}
    for key in ("from", "to", "cc", "reply_to"):
        out[key] = _addresses(out[key])
    text, attachments, parts = _body(msg, excerpt_chars, defects)
    out["excerpt"] = text
    out["attachments"] = attachments
    if parts >= MAX_PARTS:
        defects.append(f"more than {MAX_PARTS} parts: the rest was not read")
    if cut:
        defects.append("message longer than what was read: cut")
    defects += [type(d).__name__ for d in getattr(msg, "defects", [])][:5]
    out["cut"] = cut
    if defects:
        out["defects"] = sorted(set(defects))[:10]
    return {k: v for k, v in out.items() if v not in ("", [], None) or k == "excerpt"}


_HEADERS = ("From", "To", "Cc", "Reply-To", "Subject", "Date", "Message-ID", "In-Reply-To")


def _header(msg: Message, name: str, defects: list[str]) -> str:
    try:
        value = msg.get(name)
        if value is None:
            return ""
        decoded = email.header.make_header(email.header.decode_header(str(value)))
        text = str(decoded)
    except Exception:
        defects.append(f"undecodable {name} header")
        raw = msg.get(name, "")
        text = (
            raw.encode("utf-8", "replace").decode("utf-8", "replace")
            if isinstance(raw, str)
            else ""
        )
    return _clean(text)[:MAX_HEADER_CHARS]


def _addresses(value: str) -> list[str]:
    if not value:
        return []
    try:
        pairs = getaddresses([value])
    except Exception:
        return [value[:200]]
    return [addr[:200] for _, addr in pairs if addr][:MAX_ADDRESSES]


def _body(msg: Message, excerpt_chars: int, defects: list[str]) -> tuple[str, list[JSON], int]:
    """The first text/plain part (else text/html as text), the attachments, the parts seen."""
    plain = html = ""
    attachments: list[JSON] = []
    parts = 0
    for part in msg.walk():
        parts += 1
        if parts > MAX_PARTS:
            break
        if part.is_multipart():
            continue
        ctype = (part.get_content_type() or "text/plain").lower()
        filename = _safe(lambda p=part: p.get_filename())
        disposition = (_safe(lambda p=part: p.get_content_disposition()) or "").lower()
        if filename or disposition == "attachment" or not ctype.startswith("text/"):
            if len(attachments) < MAX_ATTACHMENTS:
                attachments.append({"name": _clean(str(filename or ""))[:200], "type": ctype})
            continue  # never decoded: an attachment's content stays out of prompts
        if ctype == "text/plain" and not plain:
            plain = _text_of(part, excerpt_chars * 4, defects)
        elif ctype == "text/html" and not html:
            html = _text_of(part, excerpt_chars * 8, defects)
    text = plain or html_to_text(html)
    return _clean(text)[:excerpt_chars], attachments, parts


def _text_of(part: Message, limit: int, defects: list[str]) -> str:
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        defects.append("undecodable body part")
        return ""
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload[: limit * 4].decode(charset, errors="replace")[:limit]
    except LookupError:
        defects.append(f"unknown charset {charset[:40]!r}")
        return payload[: limit * 4].decode("utf-8", errors="replace")[:limit]


def _safe(get: object) -> str | None:
    try:
        value = get()  # type: ignore[operator]
    except Exception:
        return None
    return None if value is None else str(value)


_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANKS = re.compile(r"\n\s*\n+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    return _BLANKS.sub("\n\n", _SPACES.sub(" ", text)).strip()


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in ("script", "style", "head"):
            self.skip += 1
        elif tag in ("br", "p", "div", "li", "tr", "h1", "h2", "h3"):
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def html_to_text(html: str) -> str:
    """HTML as its visible text (scripts and styles dropped), never raising."""
    if not html:
        return ""
    parser = _Text()
    try:
        parser.feed(html)
        parser.close()
    except Exception:
        return _clean(re.sub(r"<[^>]*>", " ", html))
    return _clean("".join(parser.out))
