"""The JSON API's decisions: `POST /api/inbox/ID/VERB` (approve, deny, answer, dismiss, accept)
behind the Bearer token, for a chat-ops bot or a phone shortcut. The body is optional JSON:
`{"note": …, "edit": {ARG: VALUE}}` to approve, `{"reason": …}` to deny or dismiss,
`{"answer": …}` to answer (`text` is read for any of them). The decision goes through
agentd/web/data.py `decide`, the code path of the pages' forms, itself the use cases of
agentd/operator/inbox.py that `agentd inbox VERB` calls: whatever it refuses there, it refuses
here. Answers: 200 with what was done and the item (a repeat of what already holds: 200 with
`"unchanged": true`), 400 for bad input, 404 for no such item, 409 when the item's state refuses.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agentd.errors import AgentdError, NotFound, Unchanged, UsageError
from agentd.models import JSON
from agentd.operator import inbox
from agentd.text import to_json
from agentd.web import bodies, data, flash
from agentd.web.routes import Site

MAX_BODY_BYTES = 64 * 1024  # an answer, a note and an edit: far less than this
TEXT_KEYS = {
    "approve": ("note", "text"),
    "deny": ("reason", "text"),
    "answer": ("answer", "text"),
    "dismiss": ("reason", "text"),
    "accept": (),
}


def _json(value: Any, status: int = 200) -> Response:
    return Response(to_json(value), status_code=status, media_type="application/json")


async def _body(request: Request) -> JSON:
    raw = await bodies.read(request, MAX_BODY_BYTES)  # its length checked before and while read
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise UsageError('the body is a JSON object, e.g. {"reason": "not now"}')
    return body


def _text(verb: str, body: JSON) -> str:
    for key in TEXT_KEYS[verb]:
        if key in body:
            value = body[key]
            if not isinstance(value, str):
                raise UsageError(f"{key!r} is a string")
            return value
    return ""


def _edit(verb: str, body: JSON) -> JSON | None:
    edit = body.get("edit")
    if edit is None:
        return None
    if verb != "approve" or not isinstance(edit, dict) or not edit:
        raise UsageError('"edit" goes with approve, as an object of arguments: {"edit": {"x": 1}}')
    return edit


async def decide(request: Request) -> Response:
    site = request.app.state.site
    assert isinstance(site, Site)
    item_id = int(request.path_params["item_id"])
    verb = str(request.path_params["verb"])
    try:
        if verb not in TEXT_KEYS:
            raise UsageError(f"no decision {verb!r}: one of {', '.join(TEXT_KEYS)}")
        body = await _body(request)
        text, edit = _text(verb, body), _edit(verb, body)
        done, item = await site.call(
            lambda s: data.decide(s, site.config(), item_id, verb, text, edit)
        )
    except NotFound:
        raise  # the API's 404 (agentd/api/server.py)
    except Unchanged as e:
        item = await site.call(lambda s: inbox.get_item(s, item_id))
        return _json({"unchanged": True, "message": str(e), "item": item})
    except bodies.BodyRefused as e:
        return _json({"error": str(e)}, e.status)
    except UsageError as e:
        return _json({"error": str(e)}, 400)
    except AgentdError as e:  # refused: the item's state does not allow it
        return _json({"error": str(e)}, 409)
    site.changed()
    return _json({"done": done["done"], "message": flash.done_text(done), "item": item})
