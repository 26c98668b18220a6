"""The web inbox's pages as HTML strings. Everything a model or the world wrote goes through `h`:
terminal escapes made visible as `safe` does for the CLI, then HTML-escaped — so `<script>`
shows as text and ESC as `\\x1b`. One small script: it holds the session's key, fetches each page with
it into the shell a navigation gets, and follows live updates over server-sent events."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentd.models import Goal, InboxItem, InboxKind, Run, Step
from agentd.text import jsonable, one_line, safe
from agentd.views import outer as render_outer
from agentd.views.runs import run_header, timeline
from agentd.views.times import relative
from agentd.web.edit import ArgField

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#222}
nav a{margin-right:1rem} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
pre{background:#f6f6f6;padding:.6rem;white-space:pre-wrap;word-break:break-word}
.kind{font-weight:600} .flash{background:#e8f4e8;padding:.5rem} .error{background:#fbe3e3;padding:.5rem}
.bound{border:2px solid #444;padding:.5rem} form{margin:.6rem 0} label{display:block;margin:.3rem 0}
input[type=text],textarea,select{width:100%;box-sizing:border-box} #stale{display:none;background:#ffd}
textarea{font:14px/1.4 ui-monospace,monospace} .hint{color:#555;font-size:.9em;margin:.2rem 0}
nav form{display:inline;margin:0;float:right} details{margin:.6rem 0} summary{cursor:pointer}
button{padding:.35rem .8rem} @media(max-width:32rem){body{padding:.6rem} td,th{padding:.3rem .2rem}}
"""

# The pages' one script. The session's key lives in this origin's localStorage (scheme, host and
# port: a server on another 127.0.0.1 port never sees it, as it sees every cookie) and goes out
# only from here: as a header when the script fetches the page asked for (a navigation gets the
# shell, which holds nothing) and the events, and as the first field of every form submitted.
# `data-key` (just logged in): keep the key, end this browser's previous session, go on;
# `data-forget` (logged out): drop it. On a change the daemon reports, <main> is fetched again —
# unless a form has been touched or the edit form opened, then a banner asks for a reload
# (typing is never thrown away). `toggle` does not bubble: it is heard on its way down.
SCRIPT = """
const S='agentd-key',b=document.body.dataset;let key=localStorage.getItem(S),dirty=false;
const H=()=>({headers:{'X-Agentd-Key':key}});
if(b.key!==undefined){const old=key;localStorage.setItem(S,b.key);
  if(old&&old!==b.key)fetch('/logout',{method:'POST',keepalive:true,...H()});
  location.replace(b.next)}
else if(b.forget!==undefined){localStorage.removeItem(S);location.replace(b.next)}
else if(!key)login();else load().then(listen,()=>{document.getElementById('boot').textContent=
  'agentd does not answer: reload the page to try again.'});
function login(){localStorage.removeItem(S);const at=location.pathname+location.search;
  location.replace(at==='/'?'/login':'/login?next='+encodeURIComponent(at))}
async function load(){
  const r=await fetch(location.href,H());if(r.status===401)return login();
  if(r.redirected)history.replaceState(null,'',r.url);  // an old /inbox/ID link
  const doc=new DOMParser().parseFromString(await r.text(),'text/html'),n=doc.querySelector('nav');
  const m=doc.querySelector('main')||Object.assign(document.createElement('main'),
    {textContent:doc.body.textContent});  // not one of our pages: its text, inert
  document.title=doc.title||document.title;if(n)document.querySelector('nav').replaceWith(n);
  (document.querySelector('main')||document.getElementById('boot')).replaceWith(m);
  b.version=(+b.version||0)+1;return true}
async function listen(ok){
  while(ok){try{const r=await fetch('/events',H());if(r.status===401)return login();
    const rd=r.body.getReader(),dec=new TextDecoder();let buf='',i;
    for(;;){const {value,done}=await rd.read();if(done)break;buf+=dec.decode(value,{stream:true});
      while((i=buf.indexOf('\\n\\n'))>=0){if(/^event: change/m.test(buf.slice(0,i)))changed();
        buf=buf.slice(i+2)}}
  }catch(e){}await new Promise(f=>setTimeout(f,2000))}}
function changed(){if(dirty)document.getElementById('stale').style.display='block';else load()}
document.addEventListener('input',()=>{dirty=true});
document.addEventListener('toggle',()=>{dirty=true},true);
document.addEventListener('submit',e=>{const f=e.target;if(!key||f.elements._key)return;
  const i=document.createElement('input');i.type='hidden';i.name='_key';i.value=key;f.prepend(i)});
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# Sent with every response (agentd/web/guard.py): the pages' one script and one style sheet are
# allowed by their hashes, nothing else runs or loads, forms post only here, and no other page
# may frame these (clickjacking: a page on another 127.0.0.1 port is same-site to the cookie).
CSP = "; ".join([
    "default-src 'none'", f"script-src {_sha256(SCRIPT)}", f"style-src {_sha256(STYLE)}",
    "connect-src 'self'", "img-src 'self'", "form-action 'self'", "base-uri 'none'",
    "frame-ancestors 'none'",
])  # fmt: skip


def h(text: object, *, multiline: bool = False) -> str:
    """Written text, inert: control, bidi and invisible characters shown as escapes, then HTML."""
    return html.escape(safe(text, multiline=multiline, continuation=""), quote=True)


NAV = '<a href="/">Inbox</a><a href="/?all=1">All items</a><a href="/goals">Goals</a>'
LOGOUT = '<form method="post" action="/logout"><button>Log out</button></form>'
NO_SCRIPT = (
    "<noscript><p>The agentd inbox needs JavaScript: your session's key lives in this browser's "
    "storage for this address, and only the pages' own script sends it.</p></noscript>"
)


def _document(title: str, body: str, *, attrs: str = "", script: bool = False) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width">'
        f"<title>{h(title)} · agentd</title><style>{STYLE}</style></head><body{attrs}>{body}"
        + (f"<script>{SCRIPT}</script>" if script else "")
        + "</body></html>"
    )


def page(title: str, body: str, *, flash: str = "", error: str = "", live: bool = True) -> str:
    """A whole page as the script fetches it (its <nav> and <main> go into the shell); `live`:
    logged in (the logout button)."""
    note = f'<p class="flash">{h(flash)}</p>' if flash else ""
    note += f'<p class="error">{h(error)}</p>' if error else ""
    return _document(
        title,
        f"<nav>{NAV}{LOGOUT if live else ''}</nav>"
        '<p id="stale">Something changed. <a href="">Reload</a> to see it.</p>'
        f"<main><h1>{h(title)}</h1>{note}{body}</main>",
    )


def shell() -> str:
    """What a navigation gets (it carries no key): nothing of the inbox, only the script that
    fetches the page asked for with the key, or goes to the login."""
    return _document(
        "Opening",
        f"<nav>{NAV}</nav>"
        '<p id="stale">Something changed. <a href="">Reload</a> to see it.</p>'
        f'<div id="boot"><p>Opening the inbox…</p>{NO_SCRIPT}</div>',
        script=True,
    )


def logged_in_page(key: str, next_path: str) -> str:
    """The login's answer: the script keeps `key` in this origin's storage, then opens
    `next_path` (a local path) in place of this page, so the token leaves the history."""
    attrs = f' data-key="{h(key)}" data-next="{h(next_path)}"'
    body = f'<main><h1>Logged in</h1><p><a href="{h(next_path)}">Open the inbox</a></p>{NO_SCRIPT}</main>'
    return _document("Logged in", body, attrs=attrs, script=True)


def logged_out_page(next_path: str) -> str:
    """The logout's answer: the script drops the (now ended) key, then opens `next_path`."""
    body = f'<main><h1>Logged out</h1><p><a href="{h(next_path)}">Log in again</a></p></main>'
    return _document(
        "Logged out", body, attrs=f' data-forget data-next="{h(next_path)}"', script=True
    )


def login_page(error: str = "", *, next_path: str = "/", flash: str = "") -> str:
    return page(
        "Log in",
        '<form method="post" action="/login"><label>Token (from <code>agentd web</code>)'
        '<input type="text" name="token" autocomplete="off" autofocus></label>'
        f'<input type="hidden" name="next" value="{h(next_path)}">'
        "<button>Log in</button></form>",
        error=error,
        flash=flash,
        live=False,
    )


def inbox_page(items: Sequence[InboxItem], now: datetime, *, show_all: bool, flash: str) -> str:
    rows = "".join(
        f'<tr><td><a href="/items/{i.item_id}">{i.item_id}</a></td>'
        f'<td class="kind">{h(i.kind)}</td><td><a href="/items/{i.item_id}">{h(i.title)}</a></td>'
        f"<td>{i.goal_id if i.goal_id is not None else '-'}</td>"
        f"<td>{h(relative(i.created_at, now))}</td><td>{h(i.status)}</td></tr>"
        for i in items
    )
    if not rows:
        return page("Inbox", "<p>Nothing open in the inbox.</p>", flash=flash)
    table = (
        "<table><tr><th>id</th><th>kind</th><th>title</th><th>goal</th><th>created</th>"
        f"<th>status</th></tr>{rows}</table>"
    )
    return page("All items" if show_all else "Inbox", table, flash=flash)


def _pairs(pairs: Sequence[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in pairs) + "</table>"


def _json(value: Any) -> str:
    return h(json.dumps(jsonable(value), indent=2, ensure_ascii=False), multiline=True)


def item_page(
    item: InboxItem,
    goal: Goal | None,
    fields: Sequence[ArgField],
    evidence: Sequence[tuple[str, Any]],
    now: datetime,
    *,
    flash: str = "",
    error: str = "",
) -> str:
    goal_link = (
        f'<a href="/goals/{goal.goal_id}">{goal.goal_id}: {h(goal.title)}</a>' if goal else "-"
    )
    run_link = f'<a href="/runs/{item.run_id}">{item.run_id}</a>' if item.run_id else "-"
    facts = [
        ("kind", h(item.kind)), ("status", h(item.status)), ("goal", goal_link), ("run", run_link),
        ("created", h(relative(item.created_at, now))),
        ("expires", h(relative(item.expires_at, now)) if item.expires_at else "-"),
        ("answer", h(item.answer or "-", multiline=True)),
    ]  # fmt: skip
    parts = [
        _pairs(facts),
        "<h2>What the agent wrote</h2>",
        f"<pre>{h(item.body or '-', multiline=True)}</pre>",
    ]
    if evidence:
        parts.append("<h2>Evidence</h2>")
        parts += [f"<h3>{h(k)}</h3><pre>{_json(v)}</pre>" for k, v in evidence]
    if item.kind == InboxKind.APPROVAL:
        what = "will execute if approved" if item.status == "open" else "this approval was bound to"
        parts.append(
            f'<div class="bound"><h2>What {what} (from agentd, not the model)</h2>'
            + _pairs([("action", h(item.action or "-")),
                      ("arguments", f"<pre>{_json(item.args or {})}</pre>"),
                      ("digest", h((item.digest or "-")[:12]))])
            + "</div>"
        )  # fmt: skip
    if item.status == "open":
        parts.append(_forms(item, fields))
    return page(f"Item {item.item_id}: {one_line(item.title, 80)}", "".join(parts),
                flash=flash, error=error)  # fmt: skip


def _form(item_id: int, verb: str, inner: str, button: str, form_id: str = "") -> str:
    return (
        f'<form method="post" action="/items/{item_id}/{verb}" id="{form_id or verb}-form">'
        f"{inner}<button>{button}</button></form>"
    )


def _reason(label: str, required: bool = False) -> str:
    req = " required" if required else ""
    return f'<label>{label}<textarea name="text" rows="2"{req}></textarea></label>'


NOTE = '<label>Note (optional)<input type="text" name="note"></label>'


def _forms(item: InboxItem, fields: Sequence[ArgField]) -> str:
    n = item.item_id
    if item.kind == InboxKind.QUESTION:
        return _form(n, "answer", _reason("Your answer", required=True), "Answer")
    if item.kind == InboxKind.APPROVAL:
        # The plain form sends no argument: it approves exactly what is shown above.
        return (
            "<h2>Decide</h2>"
            + _form(n, "approve", NOTE, "Approve as proposed")
            + (_edit_form(n, fields) if fields else "")
            + _form(n, "deny", _reason("Reason (told to the run)"), "Deny")
        )
    dismiss = _form(n, "dismiss", _reason("Reason (optional)"), "Dismiss")
    if item.rule == "nudge":
        return _form(n, "accept", "", "Accept the nudge") + dismiss
    return dismiss


def _edit_form(item_id: int, fields: Sequence[ArgField]) -> str:
    intro = (
        '<p class="hint">Change what should differ; the rest stays as proposed. An empty field '
        "leaves that argument unset. Only a real change counts as an edit, and it is bound by a "
        "new digest.</p>"
    )
    inner = intro + "".join(_field(item_id, f) for f in fields) + NOTE
    form = _form(item_id, "approve", inner, "Approve with these arguments", form_id="edit")
    return f'<details id="edit"><summary>Approve with an edit…</summary>{form}</details>'


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


def goals_page(goals: Sequence[Goal], now: datetime) -> str:
    rows = "".join(
        f'<tr><td><a href="/goals/{g.goal_id}">{g.goal_id}</a></td><td>{h(g.title)}</td>'
        f"<td>{h(g.status)}</td><td>{h(g.agent)}</td></tr>"
        for g in goals
    )
    body = f"<table><tr><th>id</th><th>title</th><th>status</th><th>agent</th></tr>{rows}</table>"
    return page("Goals", body if rows else "<p>No goals yet.</p>")


def goal_page(goal: Goal, runs: Sequence[Run], outlook: Any, now: datetime) -> str:
    facts = [
        ("status", h(goal.status)), ("agent", h(goal.agent)),
        ("why", h(goal.why or "-", multiline=True)),
        ("criteria", h("\n".join(goal.criteria) or "-", multiline=True)),
        ("deadline", h(relative(goal.deadline, now)) if goal.deadline else "-"),
    ]  # fmt: skip
    run_rows = "".join(
        f'<tr><td><a href="/runs/{r.run_id}">{r.run_id}</a></td><td>{h(r.status)}</td>'
        f"<td>{h(r.trigger)}</td><td>{h(relative(r.created_at, now))}</td></tr>"
        for r in runs
    )
    body = (
        _pairs(facts)
        + "<h2>Next check-in, cadence and memory</h2>"
        + f"<pre>{h(render_outer.outlook_view(outlook), multiline=True)}</pre>"
        + f"<h2>Runs</h2><table>{run_rows}</table>"
    )
    return page(f"Goal {goal.goal_id}: {one_line(goal.title, 80)}", body)


def run_page(run: Run, goal: Goal, steps: Sequence[Step], now: datetime) -> str:
    head = run_header(run, goal, now, steps)
    steps_text = h(timeline(steps, now), multiline=True)
    body = f"<pre>{h(head, multiline=True)}</pre><h2>Timeline</h2><pre>{steps_text}</pre>"
    return page(f"Run {run.run_id}", body)
