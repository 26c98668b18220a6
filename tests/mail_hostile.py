"""Hostile mail, built: what a mailbox may hold that must never crash the source or reach a prompt
unbounded (a 50 MB mail, a zip bomb attachment, malformed MIME, 8-bit headers, 10,000 parts)."""

from __future__ import annotations

import base64
import io
import zipfile


def _head(subject: bytes, extra: bytes = b"") -> bytes:
    return (
        b"From: mallory@example.com\r\nTo: mailtest@example.com\r\nSubject: " + subject + b"\r\n"
        b"Message-ID: <" + subject.split()[0].lower() + b"@hostile.example>\r\n"
        b"Date: Mon, 07 Dec 2026 03:00:00 +0000\r\nMIME-Version: 1.0\r\n" + extra
    )


def huge(size: int = 50 * 1024 * 1024) -> bytes:
    line = b"A" * 76 + b"\r\n"
    body = line * (size // len(line))
    return _head(b"huge mail", b"Content-Type: text/plain\r\n\r\n") + b"Start of it.\r\n" + body


def zip_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb.txt", b"0" * (200 * 1024 * 1024))  # 200 MB of zeros, ~200 KB zipped
    data = base64.encodebytes(buf.getvalue())
    return _head(b"zip bomb", b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n') + (
        b"--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n"
        b'--b\r\nContent-Type: application/zip\r\nContent-Disposition: attachment; filename="q.zip"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\n" + data + b"\r\n--b--\r\n"
    )


def malformed() -> bytes:
    return _head(
        b"malformed mime",
        b'Content-Type: multipart/mixed; boundary="never-closed"\r\n'
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\n",
    ) + (
        b"--never-closed\r\nContent-Type: text/html; charset=x-no-such-charset\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\n!!!not base64@@@\r\n"
        b'--never-closed\r\nContent-Type: text/plain; charset="\r\n\r\n=ZZ=\r\n'
    )


def eight_bit_header() -> bytes:
    return _head(
        "8bit h\u00e9ader \u00fcber".encode("latin-1"),
        "X-Junk: \xff\xfe\x00\x01\r\nContent-Type: text/plain\r\n\r\n".encode("latin-1"),
    ) + "Caf\u00e9 body\r\n".encode("latin-1")


def many_parts(n: int = 10_000) -> bytes:
    parts = b"".join(b"--p\r\nContent-Type: text/plain\r\n\r\npart %d\r\n" % i for i in range(n))
    head = _head(b"many parts", b'Content-Type: multipart/mixed; boundary="p"\r\n\r\n')
    return head + parts + b"--p--\r\n"


def html_only() -> bytes:
    return _head(b"html only", b"Content-Type: text/html; charset=utf-8\r\n\r\n") + (
        b"<html><head><style>p{color:red}</style><script>alert(1)</script></head>"
        b"<body><p>Hello <b>there</b></p><p>Second&nbsp;line</p></body></html>\r\n"
    )


ALL = {
    "huge": huge, "zip_bomb": zip_bomb, "malformed": malformed,
    "eight_bit_header": eight_bit_header, "many_parts": many_parts, "html_only": html_only,
}  # fmt: skip
