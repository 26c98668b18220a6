"""The approval's edit form as HTML: one field per argument of the action's schema (web/edit.py
reads it back), a select for a choice, a textarea for text and JSON, and a value holding control,
bidi or invisible characters shown escaped and read-only — never an editable copy of it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agentd.web.edit import ArgField
from agentd.web.html import h

NOTE = '<label>Note (optional)<input type="text" name="note"></label>'


def edit_form(item_id: int, fields: Sequence[ArgField]) -> str:
    """The folded "Edit…" of an approval: opened, it approves with what differs from the
    proposal."""
    intro = (
        '<p class="hint">Change what should differ; the rest stays as proposed. An empty field '
        "leaves that argument unset. Only a real change counts as an edit, and it is bound by a "
        "new digest.</p>"
    )
    inner = intro + "".join(_field(item_id, f) for f in fields) + NOTE
    form = (
        f'<form method="post" action="/items/{item_id}/approve" id="edit-form">{inner}'
        '<button class="go">Approve with these arguments</button></form>'
    )
    return f'<details id="edit" data-keep><summary class="button">Edit…</summary>{form}</details>'


def _field(item_id: int, f: ArgField) -> str:
    label = h(f.name) + (" (required)" if f.required else "")
    if f.inert:  # never an editable copy of control or bidi characters: shown inert, kept
        return (
            f"<div><label>{label}</label><pre>{h(f.value, multiline=True)}</pre>"
            '<p class="hint">This value holds control, bidi or invisible characters, shown '
            "escaped; it is kept as proposed. To change it, use "
            f"<code>agentd inbox approve {item_id} --edit</code>.</p></div>"
        )
    if f.kind == "boolean" or f.choices:
        options = ("true", "false") if f.kind == "boolean" else f.choices
        current = "" if f.value is None else json.dumps(f.value) if f.kind == "boolean" else f.value
        unset = "" if f.required and f.value is not None else '<option value="">(not set)</option>'
        opts = "".join(
            f'<option value="{h(o)}"{" selected" if o == current else ""}>{h(o)}</option>'
            for o in options
        )
        return f'<label>{label}<select name="{h(f.key)}">{unset}{opts}</select></label>'
    if f.kind in ("integer", "number"):
        shown = "" if f.value is None else h(json.dumps(f.value))
        attrs = f'type="text" inputmode="decimal" name="{h(f.key)}" value="{shown}"'
        return f'<label>{label} ({f.kind})<input {attrs} placeholder="not set"></label>'
    if f.kind == "string":
        text = "" if f.value is None else str(f.value)
        kind = ""
    else:
        text = "" if f.value is None else json.dumps(f.value, ensure_ascii=True)
        kind = " (JSON)"
    rows = min(max(text.count("\n") + 1, 2), 12)
    # The newline after the tag is the parser's to drop: a value's own first newline survives.
    area = f'<textarea name="{h(f.key)}" rows="{rows}" placeholder="not set">\n'
    return f"<label>{label}{kind}{area}{h(text, multiline=True)}</textarea></label>"
