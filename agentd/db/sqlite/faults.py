"""SQLite's errors classified for db/faults.py: its result codes (an extended code carries one in its
low byte), or its words for an error that carries no code, and the sentence each one gets.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentd.db import faults

# SQLite's primary result codes (an extended code carries one in its low byte).
_CODES = {
    5: faults.Fault.LOCKED,  # SQLITE_BUSY
    6: faults.Fault.LOCKED,  # SQLITE_LOCKED
    8: faults.Fault.READ_ONLY,  # SQLITE_READONLY
    10: faults.Fault.IO,  # SQLITE_IOERR
    11: faults.Fault.CORRUPT,  # SQLITE_CORRUPT
    13: faults.Fault.FULL,  # SQLITE_FULL
    14: faults.Fault.CANNOT_OPEN,  # SQLITE_CANTOPEN
    26: faults.Fault.CORRUPT,  # SQLITE_NOTADB
}
# For an error that carries no code (one raised by hand, an old Python): SQLite's own words.
_WORDS = [
    ("disk is full", faults.Fault.FULL),
    ("readonly", faults.Fault.READ_ONLY),
    ("read-only", faults.Fault.READ_ONLY),
    ("locked", faults.Fault.LOCKED),
    ("busy", faults.Fault.LOCKED),
    ("disk i/o", faults.Fault.IO),
    ("malformed", faults.Fault.CORRUPT),
    ("not a database", faults.Fault.CORRUPT),
    ("unable to open", faults.Fault.CANNOT_OPEN),
]


def classify(e: sqlite3.Error, path: Path) -> faults.Fault:
    """What kind of failure `e` (met on the database at `path`) is."""
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int):
        fault = _CODES.get(code & 0xFF, faults.Fault.OTHER)
    else:
        text = str(e).lower()
        fault = next((f for words, f in _WORDS if words in text), faults.Fault.OTHER)
    if fault is faults.Fault.IO and faults.is_full(path.parent):
        return faults.Fault.FULL
    return fault


def sentence(e: sqlite3.Error, path: Path) -> str:
    """`e`, met on the database at `path`, as one sentence naming the cause and the fix."""
    return faults.said(classify(e, path), path, str(e))
