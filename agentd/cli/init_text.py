"""The files `agentd init` writes when the package ships no config.example.toml or no replies file."""

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
PLACEHOLDER_REPLIES = """[
  {"reason": "nothing to do yet",
   "action": {"kind": "finish", "outcome": "succeeded",
              "summary": "edit replies.json or configure a real model"}}
]
"""
