"""The file_tail source: the last N lines of a (possibly huge, possibly growing) log file.

The file is read backwards in blocks from its end, in a worker thread, so neither a 1 GB log nor
a slow disk ever blocks the event loop.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agentd.config import FileTailSource
from agentd.models import JSON

_BLOCK_BYTES = 64 * 1024
# A file of a few enormous lines (minified JSON, binary) would otherwise be read whole: stop
# scanning backwards after this much and report the lines found so far.
_MAX_SCAN_BYTES = 1024 * 1024


class FileTailReader:
    def __init__(self, name: str, cfg: FileTailSource) -> None:
        self.name = name
        self.cfg = cfg

    async def observe(self) -> JSON:
        path = self.cfg.path
        try:
            lines, size_bytes = await asyncio.to_thread(tail_lines, path, self.cfg.lines)
        # A log that cannot be read is a broken check, not a sign about the service.
        except FileNotFoundError:
            return {"ok": False, "check_failed": True, "error": f"no such file: {path}"}
        except OSError as e:
            error = f"cannot read {path}: {e.strerror or e}"
            return {"ok": False, "check_failed": True, "error": error}
        return {"ok": True, "lines": lines, "size_bytes": size_bytes}


def tail_lines(path: Path, count: int) -> tuple[list[str], int]:
    """The last `count` lines of `path` (without line endings) and its size; blocking."""
    with path.open("rb") as f:
        size_bytes = os.fstat(f.fileno()).st_size
        pos = size_bytes
        blocks: list[bytes] = []
        newlines = 0
        # count + 1 newlines guarantee `count` whole lines even when the file ends with one.
        while pos > 0 and newlines <= count and size_bytes - pos < _MAX_SCAN_BYTES:
            step = min(_BLOCK_BYTES, pos)
            pos -= step
            f.seek(pos)
            block = f.read(step)
            blocks.append(block)
            newlines += block.count(b"\n")
    data = b"".join(reversed(blocks))
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()  # the file ends with a newline: no empty last line
    if pos > 0 and len(parts) > 1:
        parts.pop(0)  # the scan began mid-line
    lines = [p.removesuffix(b"\r").decode("utf-8", errors="replace") for p in parts[-count:]]
    return lines, size_bytes
