"""The files `agentd init` writes when the package ships no config.example.toml or no replies file,
the machine's time zone it writes into the template, and how it names the database it made."""

from __future__ import annotations

import os
import re
import zoneinfo
from collections.abc import Mapping
from typing import Any

FALLBACK_CONFIG = """\
# agentd configuration. `agentd doctor` checks it; config.example.toml documents every key.
[models.default]
provider = "scripted"          # canned replies from replies.json; no API key needed
replies = "replies.json"

[agents.default]
description = "A general agent: notes, questions, waits and finishes."
model = "default"
actions = ["notify", "ask", "sleep", "finish"]
"""
# One list per purpose, so a fresh home's runs, check-ins and builds all get a valid answer
# (agentd/llm/scripted.py): a run finishes, a check-in has nothing to report, a build makes a
# placeholder artifact that says what it is.
PLACEHOLDER_REPLIES = """{
  "decide": [
    {"reason": "nothing to do yet",
     "action": {"kind": "finish", "outcome": "succeeded",
                "summary": "edit replies.json or configure a real model"}}
  ],
  "checkin": [
    {"reason": "the placeholder model has nothing to report: configure a real model to get nudges",
     "next_look_in_s": null, "verdict": {"kind": "nothing"}}
  ],
  "plan": [{"reason": "the placeholder model plans nothing", "requirements": [], "question": null}],
  "generate": [{"notes": "", "artifact": "(made by the placeholder model: configure a real model)"}],
  "judge": [
    {"requirements": [], "serves_why": {"pass": false, "reason": "placeholder", "fix": ""},
     "summary": "the placeholder model cannot judge: configure a real model"}
  ]
}
"""


_TEMPLATE_TZ = re.compile(r'^tz = "UTC"( *)#', re.MULTILINE)  # the template's checkin.tz line


def machine_zone(env: Mapping[str, str] | None = None, localtime: str = "/etc/localtime") -> str:
    """This machine's IANA time zone (TZ, else what /etc/localtime links to), or "UTC" when
    neither names one: what quiet hours and cron schedules of a new home are read in."""
    tz = (os.environ if env is None else env).get("TZ", "").removeprefix(":").strip()
    if not tz:
        target = os.path.realpath(localtime)
        tz = target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""
    tz = tz.removeprefix("posix/").removeprefix("right/")
    try:
        zoneinfo.ZoneInfo(tz)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return "UTC"
    return "UTC" if not tz or tz.removeprefix("Etc/") in _UTC_NAMES else tz


_UTC_NAMES = frozenset({"UTC", "UCT", "Universal", "Zulu", "GMT", "GMT0", "GMT+0", "GMT-0"})


def in_zone(template: str, tz: str) -> str:
    """The template with its checkin.tz set to `tz`, the comment kept in its column."""
    width = 31  # where the template's comments begin

    def line(m: re.Match[str]) -> str:
        new = f'tz = "{tz}"'
        return new + " " * max(1, width - len(new)) + "#"

    return template if tz == "UTC" else _TEMPLATE_TZ.sub(line, template, count=1)


def database_said(backend: Any, db: Any, config: Any) -> str:
    """What `agentd init` made or kept: the SQLite file `db`, or the schema in the PostgreSQL
    database the home's [store] names (its label: never the password)."""
    if not backend.shared:
        return str(db)
    return (
        f"the agentd schema (version {backend.latest}) in the PostgreSQL database "
        f"{backend.label} ([store] in {config})"
    )
