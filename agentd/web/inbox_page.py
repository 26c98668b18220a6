"""The inbox page: what waits for a decision first (approvals and questions, the soonest to
expire on top, each with its goal, age and time to expiry), then notices and nudges, newest first,
which a form dismisses in bulk; filters by kind, goal and status (a GET form: the address says
what is shown); and, when nothing is open, what to do next.

A page at a time (issue 35): PAGE items, oldest first, after item `?after=ID` as `/api/inbox`
and `inbox list --after` page; `?limit=N` (at most MAX_PAGE) another size. Over and under a page
that is not the whole list: where it sits ("Items 51–100 of 100,000") and links to the pages
before and after it, keeping the filters — plain links, so they work by keyboard and touch and
open in a new tab as any page (the page's script signs the fetch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

from agentd.errors import UsageError
from agentd.models import Goal, InboxItem, InboxKind
from agentd.operator import inbox, listing
from agentd.text import one_line
from agentd.views.times import relative
from agentd.web.html import badge, expiry, h, page
from agentd.web.ids import number
from agentd.web.item_page import kind_word

KINDS, STATUSES = inbox.KINDS, inbox.STATUSES  # the same filters as `agentd inbox list`
WAITING = (InboxKind.APPROVAL, InboxKind.QUESTION)
NEVER = datetime.max.replace(tzinfo=UTC)
PAGE = 50  # items a page shows: the default page of `runs list` and `event list`
MAX_PAGE = 500


@dataclass(frozen=True)
class Filters:
    """What the inbox shows: a kind (or all), a goal (or all), a status ("open", "all" or one)."""

    kind: str = ""
    goal_id: int | None = None
    status: str = "open"
    after: int | None = None  # the page after this item (None: the first page)
    limit: int = PAGE

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        """From the page's query string; `?all=1` (older links) is `status=all`. A value the
        form never offers is a UsageError naming the ones it does."""
        kind = query.get("kind", "")
        status = query.get("status") or ("all" if query.get("all") == "1" else "open")
        goal, after, limit = query.get("goal", ""), query.get("after", ""), query.get("limit", "")
        if kind and kind not in KINDS:
            raise UsageError(f"no kind {kind!r}: choose one of {', '.join(KINDS)}")
        if status not in STATUSES:
            raise UsageError(f"no status {status!r}: choose one of {', '.join(STATUSES)}")
        if goal and not number(goal):
            raise UsageError(f"goal {goal[:20]!r} is not a goal's number")
        if after and not number(after):
            raise UsageError(f"after={after[:20]!r} is not an item's number")
        if limit and not (number(limit) and 1 <= int(limit) <= MAX_PAGE):
            raise UsageError(f"limit={limit[:20]!r}: give a number of items from 1 to {MAX_PAGE}")
        return cls(kind, int(goal) if goal else None, status, int(after) if after else None,
                   int(limit) if limit else PAGE)  # fmt: skip

    def href(self, after: int | None) -> str:
        """This view's address at the page after item `after` (None: its first page)."""
        query = {"kind": self.kind, "goal": "" if self.goal_id is None else str(self.goal_id),
                 "status": "" if self.status == "open" else self.status,
                 "limit": "" if self.limit == PAGE else str(self.limit),
                 "after": "" if after is None else str(after)}  # fmt: skip
        shown = urlencode({k: v for k, v in query.items() if v})
        return f"/?{shown}" if shown else "/"

    @property
    def narrowed(self) -> bool:
        return bool(self.kind or self.goal_id is not None or self.status != "open")

    @property
    def shared(self) -> inbox.Filter:
        """The same narrowing as `agentd inbox list` applies (agentd/operator/inbox.py)."""
        return inbox.Filter(self.kind or None, self.goal_id, self.status)

    def keeps(self, item: InboxItem) -> bool:
        return self.shared.keeps(item)


def way_back(given: str) -> str:
    """The inbox view a form came from (`Filters.href`), rebuilt from the filters its query
    parses — never another address: "/" (the first page of the open items) for anything else."""
    path, _, query = given.partition("?")
    if path != "/":
        return "/"
    try:
        f = Filters.parse(dict(parse_qsl(query, keep_blank_values=True)))
    except UsageError:
        return "/"
    return f.href(f.after)


@dataclass(frozen=True)
class Pager:
    """Where a page sits in its list, and the links to the pages either side (None: none)."""

    first: int  # the position of the page's first item (1: the first)
    shown: int
    total: int
    prev: str | None
    next: str | None
    elsewhere: tuple[tuple[str, int], ...] = ()  # open approvals and questions on other pages

    @classmethod
    def of(cls, around: listing.Around, f: Filters) -> Pager:
        page = around.page
        prev = f.href(around.prev_after) if around.previous else None
        nxt = f.href(page.next_after) if page.next_after is not None else None
        counts = dict(around.waiting or {})
        for item in page.rows:
            if item.status == "open" and str(item.kind) in counts:
                counts[str(item.kind)] -= 1
        elsewhere = tuple((k, n) for k, n in sorted(counts.items()) if n > 0)
        return cls(around.before + 1, len(page.rows), page.total, prev, nxt, elsewhere)

    def waiting_line(self) -> str:
        """What waits for a decision on other pages, with links to it alone (the kind filter);
        "" when nothing does."""
        if not self.elsewhere:
            return ""
        links = " · ".join(f'<a href="/?kind={k}">{n:,} {k}{"s" if n > 1 else ""}</a>'
                           for k, n in self.elsewhere)  # fmt: skip
        return (
            f'<p class="flash" id="waiting-elsewhere">Waiting for you on other pages: {links}</p>'
        )

    def html(self, where: str) -> str:
        """The pager (`where`: "top" or "bottom"), or "" when the page is the whole list."""
        if self.prev is None and self.next is None:
            return ""
        last = self.first + self.shown - 1
        place = (f"Items {self.first:,}–{last:,} of {self.total:,}" if self.shown
                 else f"No items here; {self.total:,} in all")  # fmt: skip
        prev = (f'<a href="{h(self.prev)}" rel="prev">← Previous</a>' if self.prev
                else '<span class="off"></span>')  # fmt: skip
        nxt = (f'<a href="{h(self.next)}" rel="next">Next →</a>' if self.next
               else '<span class="off"></span>')  # fmt: skip
        return (
            f'<div class="pager" id="pager-{where}" role="navigation" aria-label="Pages of the '
            f'inbox ({where})">{prev}<span class="place">{place}</span>{nxt}</div>'
        )


def ordered(items: Sequence[InboxItem]) -> tuple[list[InboxItem], list[InboxItem]]:
    """(what waits for a decision: open first, the soonest expiry first, then the oldest;
    notices and nudges: newest first)."""
    waiting = [i for i in items if i.kind in WAITING]
    waiting.sort(key=lambda i: (i.status != "open", i.expires_at or NEVER, i.created_at))
    notices = [i for i in items if i.kind not in WAITING]
    notices.sort(key=lambda i: (i.status != "open", -i.created_at.timestamp()))
    return waiting, notices


def inbox_page(
    items: Sequence[InboxItem],
    goals: Mapping[int, Goal],
    filters: Filters,
    now: datetime,
    *,
    flash: str = "",
    error: str = "",
    held: str = "",
    pager: Pager | None = None,
) -> str:
    """`items`: those `filters` keep (a page of them, placed by `pager`); `goals`: their goals
    by id (titles, the goal filter); `held`: a line on messages held by quiet hours, when there
    are some."""
    waiting, notices = ordered(items)
    parts = [f'<p class="meta" id="held">{h(held)}</p>' if held else "", _filters(filters, goals)]
    parts.append(pager.waiting_line() + pager.html("top") if pager else "")
    if not items and pager is not None and pager.prev:
        parts.append('<div class="empty" id="empty"><p>Nothing on this page.</p>'
                     f'<p><a href="{h(filters.href(None))}">The first page</a></p></div>')  # fmt: skip
    elif not items:
        parts.append(_empty(filters))
    if waiting:
        parts.append(f'<section id="waiting"><h2>Waiting for you ({len(waiting)})</h2>')
        parts.append(f'<ul class="cards">{"".join(_card(i, goals, now) for i in waiting)}</ul>')
        parts.append("</section>")
    if notices:
        parts.append(_notices(notices, goals, now, filters.href(filters.after)))
    parts.append(pager.html("bottom") if pager else "")
    title = "Inbox" if filters.status == "open" else "All items"
    return page(title, "".join(parts), flash=flash, error=error)


def _meta(item: InboxItem, goals: Mapping[int, Goal], now: datetime) -> str:
    bits = [badge(kind_word(item), kind_word(item))]
    if item.status != "open":
        bits.append(badge(item.status, item.status))
    goal = goals.get(item.goal_id) if item.goal_id is not None else None
    bits.append(h(one_line(goal.title, 48)) if goal else "home-wide")
    bits.append(h(relative(item.created_at, now)))
    if item.status == "open" and item.expires_at is not None:
        bits.append(expiry(item.expires_at, now))
    return f'<p class="meta">{" · ".join(bits)}</p>'


def _card(item: InboxItem, goals: Mapping[int, Goal], now: datetime, pick: str = "") -> str:
    link = f'<a class="t" href="/items/{item.item_id}">{h(one_line(item.title, 140))}</a>'
    return (
        f'<li id="item-{item.item_id}">{pick}<div class="body">{link}'
        f"{_meta(item, goals, now)}</div></li>"
    )


def _notices(
    notices: Sequence[InboxItem], goals: Mapping[int, Goal], now: datetime, back: str
) -> str:
    """Notices and nudges; the open ones each with a box to tick for the bulk dismissal, which
    returns to `back` (this view: its filters and page)."""
    open_ids = [i.item_id for i in notices if i.status == "open"]
    cards = "".join(_card(i, goals, now, _pick(i) if i.status == "open" else "") for i in notices)
    head = f'<section id="notices"><h2>Notices and nudges ({len(notices)})</h2>'
    if not open_ids:
        return f'{head}<ul class="cards">{cards}</ul></section>'
    shown = ",".join(map(str, open_ids))
    buttons = (
        '<div class="controls"><button name="scope" value="selected">Dismiss selected</button>'
        f'<button name="scope" value="all">Dismiss all {len(open_ids)} shown</button></div>'
    )
    return (
        f'{head}<form method="post" action="/dismiss" id="bulk-form">'
        f'<input type="hidden" name="shown" value="{shown}">'
        f'<input type="hidden" name="back" value="{h(back)}"><ul class="cards">{cards}</ul>'
        f"{buttons}</form></section>"
    )


def _pick(item: InboxItem) -> str:
    label = f"select item {item.item_id}"
    return f'<input type="checkbox" name="item" value="{item.item_id}" aria-label="{label}">'


def _filters(f: Filters, goals: Mapping[int, Goal]) -> str:
    def select(name: str, label: str, options: Sequence[tuple[str, str]], current: str) -> str:
        opts = "".join(
            f'<option value="{h(v)}"{" selected" if v == current else ""}>{h(t)}</option>'
            for v, t in options
        )
        return f'<label>{label}<select name="{name}">{opts}</select></label>'

    kinds = [("", "every kind"), *((k, k) for k in KINDS)]
    goal_opts = [("", "every goal")]
    goal_opts += [(str(g.goal_id), f"{g.goal_id}: {one_line(g.title, 40)}") for g in goals.values()]
    statuses = [(s, s) for s in STATUSES]
    current_goal = "" if f.goal_id is None else str(f.goal_id)
    form = (
        '<form method="get" action="/" class="filters" id="filter-form">'
        + select("kind", "Kind", kinds, f.kind)
        + select("goal", "Goal", goal_opts, current_goal)
        + select("status", "Status", statuses, f.status)
        + "<button>Show</button></form>"
    )
    opened = " open" if f.narrowed else ""
    return f'<details id="filters"{opened}><summary>Filter by kind, goal, status</summary>{form}</details>'


def _empty(f: Filters) -> str:
    if f.narrowed:
        return (
            '<div class="empty" id="empty"><p>Nothing matches these filters.</p>'
            '<p><a href="/">Show what is open</a></p></div>'
        )
    return (
        '<div class="empty" id="empty"><p><strong>Nothing needs you right now.</strong></p>'
        "<p>When a run wants approval for a risky action, or has a question, it appears here "
        "first, with its expiry; this page updates by itself while it is open.</p>"
        '<p>To give agentd something to watch, add a goal: <code>agentd goal add "Keep checkout '
        'up" --why "…"</code>. See <a href="/goals">the goals</a> and their next check-ins, '
        'or <a href="/?status=all">every item</a> ever raised.</p></div>'
    )
