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

from agentd.text import jsonable, safe
from agentd.views.times import relative

STYLE = """
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:64rem;padding:0 1rem 2rem;color:#1d1d1f}
nav{display:flex;flex-wrap:wrap;gap:.2rem 1rem;align-items:center;padding:.45rem 0;
 border-bottom:1px solid #e3e3e8}
nav a{text-decoration:none;font-weight:600;color:#0b57d0} nav form{margin:0 0 0 auto}
h1{font-size:1.3rem;line-height:1.25;margin:.6rem 0 .25rem;overflow-wrap:anywhere}
h2{font-size:1rem;margin:1.1rem 0 .35rem} h3{font-size:.95rem;margin:.6rem 0 .2rem}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #e3e3e8;padding:.3rem .5rem;text-align:left;vertical-align:top}
pre,code,.mono{font:13px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{background:#f5f5f7;padding:.5rem;white-space:pre-wrap;word-break:break-word;margin:.3rem 0}
.flash{background:#e6f4ea;padding:.5rem;border-radius:.3rem}
.error{background:#fce8e6;padding:.5rem;border-radius:.3rem}
#stale{display:none;background:#fff8c5;padding:.4rem}
.meta{color:#5f6368;font-size:.88rem;margin:.15rem 0}
.hint{color:#5f6368;font-size:.88rem;margin:.2rem 0}
.badge{display:inline-block;font-size:.72rem;font-weight:700;letter-spacing:.03em;
 text-transform:uppercase;
 padding:.05rem .45rem;border-radius:.7rem;background:#ececf0;color:#444;vertical-align:.1em}
.b-approval{background:#ffe2b8;color:#6b3a00} .b-question{background:#d8e6ff;color:#0b3d91}
.b-nudge{background:#e4f3e0;color:#1e5b1a} .b-open{background:#fff;border:1px solid #bbb}
.b-failed,.b-denied,.b-expired{background:#fde0dc;color:#8c1d12}
.b-succeeded,.b-approved,.b-consumed{background:#e4f3e0;color:#1e5b1a}
.bound{border:2px solid #1d1d1f;border-radius:.4rem;padding:.45rem .6rem;margin:.5rem 0}
.bound h2{margin:0 0 .25rem;font-size:.9rem}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .6rem;margin:0}
dl.kv dt{color:#5f6368;font-size:.85rem} dl.kv dd{margin:0;overflow-wrap:anywhere}
.decide{display:flex;flex-wrap:wrap;gap:.4rem;margin:.5rem 0} .decide form{margin:0}
.decide .wide{flex:1 1 18rem;max-width:36rem;display:flex;gap:.4rem} .decide .wide input{flex:1;min-width:0}
.decide details{margin:0} .decide details[open]{flex:1 1 100%}
form{margin:.5rem 0} label{display:block;margin:.3rem 0}
input[type=text],textarea,select{width:100%;font:inherit;padding:.35rem;border:1px solid #aaa;
 border-radius:.3rem}
textarea{font:14px/1.4 ui-monospace,monospace}
button,summary.button{font:inherit;padding:.45rem .95rem;border-radius:.4rem;border:1px solid #888;
 background:#fff;color:#1d1d1f;cursor:pointer;min-height:2.75rem;display:inline-block}
button.go{background:#1a7f37;border-color:#1a7f37;color:#fff;font-weight:700}
button.stop{border-color:#b42318;color:#b42318;font-weight:700}
details{margin:.5rem 0} summary{cursor:pointer;color:#0b57d0}
summary.button{list-style:none;color:#1d1d1f;display:inline-flex;align-items:center}
.words{border-left:3px solid #c5c5cf;padding:.05rem .6rem;margin:.4rem 0}
.who{font-size:.72rem;color:#5f6368;text-transform:uppercase;letter-spacing:.03em;margin:0}
.words p{margin:.1rem 0;overflow-wrap:anywhere} .ev{margin:.2rem 0;padding-left:1.1rem}
.ev li{margin:.1rem 0}
.ev code.q{display:block;overflow-wrap:anywhere;padding-left:.35rem;border-left:3px solid transparent}
.o-succeeded{color:#1e5b1a;font-weight:600} .o-failed,.o-denied,.o-expired{color:#8c1d12;font-weight:600}
.ev code.err{border-left-color:#b42318;background:#fdf0ee;color:#8c1d12}
details.more{margin:0} details.more>summary{font-size:.85rem} .ev .more-lines{display:block;font-size:.85rem}
@media(min-width:32rem){details.more>summary{display:none}
 details.more::details-content{content-visibility:visible}}
ul.cards{list-style:none;padding:0;margin:0}
.cards li{border-bottom:1px solid #e3e3e8;padding:.45rem 0;display:flex;gap:.5rem}
.cards a.t{font-weight:600;overflow-wrap:anywhere;color:#1d1d1f;text-decoration:none}
.cards .body{flex:1;min-width:0}
.filters{display:flex;flex-wrap:wrap;gap:.4rem;align-items:end}
.filters label{margin:0;flex:1 1 9rem;font-size:.85rem}
.empty{background:#f5f5f7;border-radius:.4rem;padding:.7rem 1rem}
ol.tl{list-style:none;padding:0;margin:.3rem 0;border-left:2px solid #d0d0d8}
.tl li{position:relative;margin:0 0 .55rem;padding-left:.9rem}
.tl li::before{content:"";position:absolute;left:-.42rem;top:.45rem;width:.7rem;height:.7rem;
 border-radius:50%;background:#8a8a96}
.tl li.k-act::before{background:#0b57d0} .tl li.k-wait::before{background:#d29922}
.tl li.k-finish::before{background:#1a7f37}
.tl li.bad::before{background:#b42318} .tl .when{color:#5f6368;font-size:.8rem}
.tl .kind{font-weight:700;font-size:.78rem;text-transform:uppercase;margin-right:.3rem}
.tl .line{margin:.05rem 0;overflow-wrap:anywhere} .tl .sub{color:#444;font-size:.9rem}
.controls{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center}
.controls form{margin:0;display:flex;gap:.3rem}
.controls select{width:auto}
.pager{display:grid;grid-template-columns:auto 1fr auto;gap:.5rem;align-items:center;margin:.6rem 0}
.pager a{display:inline-flex;align-items:center;min-height:2.75rem;padding:.45rem .95rem;
 border:1px solid #888;border-radius:.4rem;text-decoration:none;color:#1d1d1f;font-weight:600}
.pager .off{min-width:1px} .pager .place{color:#5f6368;font-size:.88rem;text-align:center}
a:focus-visible,button:focus-visible,summary:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
@media(max-width:32rem){body{padding:0 .6rem 2rem} td,th{padding:.3rem .2rem} h1{font-size:1.15rem}}
"""

# The pages' one script. The session (its id and signing key) lives in this origin's IndexedDB
# (scheme, host and port: a server on another 127.0.0.1 port never sees it, as it sees every
# cookie), the key as a non-extractable CryptoKey: no script, not even one a program squatting
# the port serves in this origin, can read it out (it can only sign while its page is open; see
# docs/web-inbox.md). The key never leaves the browser: before each request, `auth` asks
# /prove with a fresh nonce, checks the answer is the HMAC only agentd can make (whoever took
# the port while agentd was down cannot), and only then signs that request (method, path, the
# daemon's one-use challenge; web/proof.py) — the header of what it fetches, the first field of
# a form. A server that does not prove itself gets nothing, and the page tries again later.
# `data-key` (just logged in): keep the session, end this browser's previous one, go on;
# `data-forget` (logged out): drop it. On a change the daemon reports, <main> is fetched again —
# unless a form has been touched or the edit form opened, then a banner asks for a reload
# (typing is never thrown away, not even typing done while the page was being fetched). The
# stream's `hello` (each connection's first event) loads the page once more: a change made
# between the page's fetch and the stream's start sends no `change` event. `toggle` does not
# bubble: it is heard on its way down; only a fold marked `data-keep` (the edit form) counts,
# not one a page arrives with open (the filters).
SCRIPT = """
const b=document.body.dataset,E=new TextEncoder(),T='session';let ses=null,dirty=false;
const hex=a=>[...new Uint8Array(a)].map(x=>x.toString(16).padStart(2,'0')).join('');
function idb(mode,f){return new Promise((ok,no)=>{const o=indexedDB.open('agentd',1);
  o.onupgradeneeded=()=>o.result.createObjectStore(T);o.onerror=()=>no(o.error);
  o.onsuccess=()=>{const d=o.result,x=d.transaction(T,mode),r=f(x.objectStore(T));
    x.oncomplete=()=>{d.close();ok(r.result)};x.onerror=x.onabort=()=>{d.close();no(x.error)}}})}
const drop=()=>idb('readwrite',s=>s.delete(T)).catch(()=>{});
async function keep(text){const [id,k]=text.split('.');  // the key, unreadable even to this origin
  const s={id,key:await crypto.subtle.importKey('raw',E.encode(k),{name:'HMAC',hash:'SHA-256'},
    false,['sign'])};await idb('readwrite',o=>o.put(s,T));return s}
async function sign(k,t){return hex(await crypto.subtle.sign('HMAC',k,E.encode(t)))}
async function auth(s,m,t){const n=hex(crypto.getRandomValues(new Uint8Array(16)));
  const r=await fetch('/prove?session='+s.id+'&nonce='+n,{cache:'no-store'});
  if(r.status===401)return null;if(!r.ok)throw new Error('not agentd');const p=await r.json();
  if(typeof p.challenge!=='string'||p.proof!==await sign(s.key,'agentd-daemon\\n'+n+'\\n'+p.challenge))
    throw new Error('not agentd');  // not this home's daemon: nothing of the session goes to it
  return s.id+'.'+p.challenge+'.'+await sign(s.key,'agentd-client\\n'+m+'\\n'+t+'\\n'+p.challenge)}
async function get(url){const u=new URL(url,location.href);  // a refusal is asked about once more:
  for(let i=0;;i++){const a=await auth(ses,'GET',u.pathname+u.search);  // only /prove ends a session
    if(a===null)return null;const r=await fetch(u,{headers:{'X-Agentd-Auth':a}});
    if(r.status!==401||i)return r}}  // (a challenge void meanwhile: agentd restarted, say)
async function start(){localStorage.removeItem('agentd-key');  // an older agentd's: void
  ses=await idb('readonly',s=>s.get(T)).catch(()=>null)||null;
  if(b.key!==undefined){const was=ses;ses=await keep(b.key);const go=()=>location.replace(b.next);
    if(!was||was.id===ses.id)return go();return auth(was,'POST','/logout').then(a=>a&&fetch('/logout',
      {method:'POST',keepalive:true,headers:{'X-Agentd-Auth':a}})).then(go,go)}
  if(b.forget!==undefined){await drop();return location.replace(b.next)}
  if(!ses)return login();load().then(listen,()=>{document.getElementById('boot').textContent=
    'agentd does not answer: reload the page to try again.'})}
start();
function login(){const at=location.pathname+location.search;ses=null;
  drop().then(()=>location.replace(at==='/'?'/login':'/login?next='+encodeURIComponent(at)))}
async function load(again){
  const r=await get(location.href);if(r===null||r.status===401)return login();
  const t=await r.text();if(again&&dirty)return stale();  // typed into meanwhile: kept, said
  const doc=new DOMParser().parseFromString(t,'text/html'),n=doc.querySelector('nav');
  const m=doc.querySelector('main')||Object.assign(document.createElement('main'),
    {textContent:doc.body.textContent});  // not one of our pages: its text, inert
  document.title=doc.title||document.title;if(n)document.querySelector('nav').replaceWith(n);
  document.querySelectorAll('main details[open][id]').forEach(d=>{  // a fold opened stays open
    const o=m.querySelector('#'+CSS.escape(d.id));if(o)o.open=true});
  (document.querySelector('main')||document.getElementById('boot')).replaceWith(m);
  b.version=(+b.version||0)+1;return true}
async function listen(ok){
  while(ok){try{const r=await get('/events');if(r===null||r.status===401)return login();
    const rd=r.body.getReader(),dec=new TextDecoder();let buf='',i;
    for(;;){const {value,done}=await rd.read();if(done)break;buf+=dec.decode(value,{stream:true});
      while((i=buf.indexOf('\\n\\n'))>=0){const e=buf.slice(0,i);buf=buf.slice(i+2);
        if(/^event: change/m.test(e))changed();else if(/^event: hello/m.test(e)&&!dirty)load(true)}}
  }catch(e){}await new Promise(f=>setTimeout(f,2000))}}
function stale(){document.getElementById('stale').style.display='block';return true}
function changed(){if(dirty)stale();else load(true)}
document.addEventListener('input',()=>{dirty=true});
document.addEventListener('toggle',e=>{if(e.target.open&&e.target.dataset.keep!==undefined)dirty=true},true);
document.addEventListener('submit',e=>{const f=e.target,s=e.submitter;  // never a GET form
  if(!ses||f.method!=='post'||f.dataset.signed!==undefined)return;e.preventDefault();
  dirty=true;  // no reload may swap this form out while it is being signed
  const u=new URL(f.action);auth(ses,'POST',u.pathname+u.search).then(a=>{if(a===null)return login();
    f.querySelectorAll('input[name=_auth]').forEach(x=>x.remove());
    const i=document.createElement('input');i.type='hidden';i.name='_auth';i.value=a;f.prepend(i);
    if(!f.isConnected){f.hidden=true;document.body.prepend(f)}  // a reload swapped it out
    f.dataset.signed='';f.requestSubmit(s||undefined);delete f.dataset.signed},
    ()=>alert('agentd does not answer on this address: nothing was sent. Try again later.'))});
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


NAV = '<a href="/">Inbox</a><a href="/goals">Goals</a>'
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


def pairs(rows: Sequence[tuple[str, str]]) -> str:
    """Facts as a definition list: (label, HTML already escaped)."""
    return '<dl class="kv">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def json_text(value: Any) -> str:
    return h(json.dumps(jsonable(value), indent=2, ensure_ascii=False), multiline=True)


def badge(word: str, css: str = "") -> str:
    """A short word in a pill (`approval`, `open`, `failed`), coloured by `css` or the word."""
    return f'<span class="badge b-{h(css or word)}">{h(word)}</span>'


def post_form(action: str, inner: str, button: str, *, form_id: str = "", css: str = "") -> str:
    """A form that posts to `action` (the script adds the session's key as its first field)."""
    ident = f' id="{form_id}"' if form_id else ""
    cls = f' class="{css}"' if css else ""
    return (
        f'<form method="post" action="{action}"{ident}>{inner}<button{cls}>{button}</button></form>'
    )


# What a page path names, for the 404 a browser user reads (never a command to run).
MISSING = (
    ("/items/", "inbox item"),
    ("/inbox/", "inbox item"),
    ("/goals/", "goal"),
    ("/runs/", "run"),
)


def not_found_page(path: str) -> str:
    """A 404 for a person in a browser: what is missing, and where to go instead."""
    what = next(
        (f"There is no {noun} {h(path[len(prefix):].split('/')[0])}"
         for prefix, noun in MISSING if path.startswith(prefix)),
        f"There is no page at {h(path)}",
    )  # fmt: skip
    body = (
        f'<p>{what} here.</p><p class="hint">It may belong to another agentd home, or the link '
        "was cut short.</p>"
        '<p><a href="/">Back to the inbox</a> · <a href="/goals">All goals</a></p>'
    )
    return page("Not found", body)


def expiry(at: datetime | None, now: datetime) -> str:
    """`expires in 55m`, or `expired 5m ago` (not yet closed by the daemon); "" without one."""
    if at is None:
        return ""
    word = "expires" if at > now else "expired"
    return f"<strong>{word} {h(relative(at, now))}</strong>"
