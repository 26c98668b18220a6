"""The `scripted` provider: canned replies from a file, the Nth reply for a run's Nth decision.

Deterministic across restarts, so tests, the demo and crash checks drive the real engine path. The
replies file is a JSON list; each entry is a reply object (sent as JSON), a raw string (sent as is,
garbage included), `{"reply": ..., "delay_s": N}`, or `{"error": "...", "retry_after_s": N,
"attempts": K, "reply": ...}` — the first K tries of that decision fail (all, without "reply").

The file may instead be an object of such lists by request purpose — `{"decide": [...], "plan":
[...], "generate": [...], "judge": [...], "checkin": [...]}` — the Nth call of a purpose in a run
getting its Nth entry (a build run's generator and judge are scripted apart). A purpose without a
list is rejected with a clear error.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agentd.config import ScriptedModel
from agentd.errors import ConfigError, ModelError, ModelRejected
from agentd.llm import ModelReply, ModelRequest, mechanical_summary

BUILD_PURPOSES = ("plan", "generate", "judge")


class ScriptedProvider:
    def __init__(self, name: str, cfg: ScriptedModel) -> None:
        self.name = name
        self.cfg = cfg
        self.replies = load_replies(cfg.replies)

    async def complete(self, request: ModelRequest) -> ModelReply:
        if self.cfg.request_log is not None:
            await asyncio.to_thread(self._log, request)
        if request.purpose == "summarize":  # replies are for decisions only; summaries are canned
            text = json.dumps({"summary": mechanical_summary(request.context)})
            return ModelReply(text=text, model=f"scripted:{self.cfg.replies.name}")
        replies = self._for(request.purpose)
        entry = replies[min(max(request.decision_no, 1), len(replies)) - 1]
        failing = isinstance(entry, dict) and "error" in entry
        if failing and ("reply" not in entry or request.attempt <= int(entry.get("attempts", 1))):
            raise ModelError(
                f"scripted error: {entry['error']}", retry_after_s=entry.get("retry_after_s")
            )
        if isinstance(entry, dict) and "reply" in entry:
            await asyncio.sleep(float(entry.get("delay_s", 0)))
            entry = entry["reply"]
        text = entry if isinstance(entry, str) else json.dumps(entry)
        return ModelReply(
            text=text,
            model=f"scripted:{self.cfg.replies.name}",
            tokens_in=len(request.system) // 4 + len(request.prompt) // 4,
            tokens_out=len(text) // 4,
        )

    def _for(self, purpose: str) -> list[Any]:
        if isinstance(self.replies, list):
            return self.replies
        replies = self.replies.get(purpose)
        if not replies:
            raise ModelRejected(
                f"scripted replies file {self.cfg.replies.name} has no {purpose!r} list"
            )
        return list(replies)

    def _log(self, request: ModelRequest) -> None:
        assert self.cfg.request_log is not None
        record: dict[str, Any] = {
            "run_id": request.run_id,
            "n": request.decision_no,
            "purpose": request.purpose,
            "prompt_bytes": len(request.system.encode()) + len(request.prompt.encode()),
            "t": time.time(),
        }
        # Tests read what a generator, a judge, a decision or a check-in was shown.
        if request.purpose in (*BUILD_PURPOSES, "decide", "checkin"):
            record["prompt"] = request.prompt
        line = json.dumps(record)
        with self.cfg.request_log.open("a") as f:
            f.write(line + "\n")


def load_replies(path: Path) -> list[Any] | dict[str, list[Any]]:
    try:
        replies = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: scripted replies file not found") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}:{e.lineno}: replies file is not valid JSON: {e.msg}") from None
    if (
        isinstance(replies, dict)
        and replies
        and all(isinstance(v, list) and v for v in replies.values())
    ):
        return replies
    if not isinstance(replies, list) or not replies:
        raise ConfigError(
            f"{path}: replies file must be a non-empty JSON list, or an object of non-empty "
            'lists by purpose ({"decide": [...], "generate": [...], "judge": [...]})'
        )
    return replies
