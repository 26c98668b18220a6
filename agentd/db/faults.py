"""What a storage failure means to the operator: a full disk, a read-only file, folder or mount, a
failing disk, a lock another process holds, corruption — classified from the driver's error
(db/sqlite/faults.py reads SQLite's result codes) or an OSError's errno, and said in one sentence
that names the cause and the fix. The CLI's messages, the daemon's start-up refusals and its
watchdog's exit note all take their words from here.
"""

from __future__ import annotations

import errno
import os
from enum import StrEnum
from pathlib import Path

RESTORE_HINT = "restore it from a backup (docs/systemd.md, 'Backups and restore')"
# Below this much free space an I/O error is the disk filling up: SQLite reports a -shm file it
# cannot extend (32 KiB) as "disk I/O error", not as "database or disk is full".
LOW_SPACE_BYTES = 1 << 20


class Fault(StrEnum):
    FULL = "disk full"
    READ_ONLY = "read-only"
    IO = "I/O error"
    LOCKED = "locked"
    CORRUPT = "corrupt"
    CANNOT_OPEN = "cannot open"
    OTHER = "other"  # a bug or a broken constraint: the request's problem, not the storage's


_ERRNOS = {
    errno.ENOSPC: Fault.FULL,
    errno.EDQUOT: Fault.FULL,
    errno.EROFS: Fault.READ_ONLY,
    errno.EIO: Fault.IO,
}


def free_bytes(folder: Path) -> int | None:
    """Free space on the filesystem holding `folder` for this process (None if unknown); a
    filesystem with no inode left counts as having none."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_files and st.f_ffree == 0:
        return 0
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail  # root may use the reserve
    return blocks * st.f_frsize


def is_full(folder: Path) -> bool:
    free = free_bytes(folder)
    return free is not None and free < LOW_SPACE_BYTES


def _size(n: int | None) -> str:
    if n is None:
        return "too little space"
    if n < 1 << 10:
        return f"{n} bytes"
    return f"{n >> 10} KiB" if n < 1 << 20 else f"{n >> 20} MiB"


def read_only_reason(db: Path) -> str | None:
    """Why this process cannot write `db` (a read-only mount, a file or folder it may not write),
    or None."""
    folder = db.parent
    with_folder = "and its folder (SQLite writes -wal and -shm beside it)"
    try:
        mounted_ro = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        mounted_ro = False
    if mounted_ro:
        return f"the filesystem holding {folder} is mounted read-only: remount it read-write"
    if db.exists() and not os.access(db, os.W_OK):
        return f"{db} is read-only for this user: give it write access to the file {with_folder}"
    if not os.access(folder, os.W_OK):
        return f"{folder} is read-only for this user: give it write access {with_folder}"
    return None


def full_disk(where: Path, said: str) -> str:
    """The full-disk sentence for a write under `where` (a folder) that failed with `said`."""
    return (
        f"the disk is full ({_size(free_bytes(where))} free on the filesystem holding {where}; "
        f"{said}), so nothing changed: free space there (`df -h {where}` shows it), then retry"
    )


def said(fault: Fault, path: Path, text: str) -> str:
    """A `fault` met on the database at `path` (the driver said `text`) as one sentence naming
    the cause and the fix."""
    folder = path.parent
    match fault:
        case Fault.FULL:
            return f"{path}: {full_disk(folder, text)}"
        case Fault.READ_ONLY:
            reason = read_only_reason(path) or "give agentd write access to it and its folder"
            return f"{path}: database is read-only ({text}): {reason}"
        case Fault.LOCKED:
            return (
                f"{path}: database is locked by another process ({text}); retry shortly, and if "
                f"it stays locked, find what holds it with `fuser -v {path}` (an sqlite3 shell "
                "left in a transaction, a backup tool)"
            )
        case Fault.IO:
            return (
                f"{path}: the disk failed a read or write ({text}); check the device and the "
                "kernel log (`journalctl -k`), then retry; `agentd doctor` checks the database"
            )
        case Fault.CORRUPT:
            return (
                f"{path}: the database is corrupt ({text}); stop agentd, keep the damaged file "
                f"for inspection, and {RESTORE_HINT}"
            )
        case Fault.CANNOT_OPEN:
            return _cannot_open(path, text)
    return f"{path}: database error: {text}"


def _cannot_open(path: Path, text: str) -> str:
    if path.exists() and not os.access(path, os.R_OK):
        return f"{path}: cannot open database: this user may not read it ({text})"
    if reason := read_only_reason(path):
        return f"{path}: cannot open database: read-only: {reason} ({text})"
    return f"{path}: cannot open database ({text}); check the path and permissions"


def os_sentence(e: OSError, path: Path | None = None) -> str:
    """A file error (writing the pid file at `path`, the config) as one sentence naming the cause
    and the fix; a fault that is not the storage's keeps the system's words."""
    where = path or (Path(e.filename) if e.filename else None)
    said = e.strerror or str(e)
    prefix = f"{where}: " if where else ""
    match _ERRNOS.get(e.errno or 0):
        case Fault.FULL:
            if where is None:
                return f"the disk is full ({said}): free space (`df -h` shows where), then retry"
            return prefix + full_disk(where.parent, said)
        case Fault.READ_ONLY:
            return (
                f"{prefix}the filesystem is read-only ({said}): remount it read-write, or use a "
                "home on a writable filesystem"
            )
        case Fault.IO:
            return (
                f"{prefix}the disk failed a read or write ({said}): check the device and the "
                "kernel log (`journalctl -k`)"
            )
    return prefix + said


def exit_note(fault: Fault, path: Path) -> str:
    """What to do once the daemon stopped because the database at `path` kept failing."""
    folder = path.parent
    intact = "what agentd committed is intact, so there is nothing to restore"
    match fault:
        case Fault.FULL:
            return (
                f"the disk is full: free space on the filesystem holding {folder} "
                f"(`df -h {folder}`), then start agentd again; {intact}"
            )
        case Fault.READ_ONLY:
            reason = read_only_reason(path) or f"make {path} and {folder} writable"
            return f"the database became read-only: {reason}, then start agentd again; {intact}"
        case Fault.IO:
            return (
                "the disk failed reads or writes: check the device and the kernel log "
                "(`journalctl -k`); the next start's quick_check says whether to " + RESTORE_HINT
            )
    return "if the database is corrupt the next start says so: " + RESTORE_HINT
