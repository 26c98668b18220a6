"""The files `agentd init` writes when the package ships no config.example.toml or no replies file,
and how it names the database it made."""

from __future__ import annotations

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


def database_said(backend: Any, db: Any, config: Any) -> str:
    """What `agentd init` made or kept: the SQLite file `db`, or the schema in the PostgreSQL
    database the home's [store] names (its label: never the password)."""
    if not backend.shared:
        return str(db)
    return (
        f"the agentd schema (version {backend.latest}) in the PostgreSQL database "
        f"{backend.label} ([store] in {config})"
    )
