"""The page shell every view shares, links and small widgets.

Plain server-rendered HTML: no external resource, no build step; the style sheet and the script
are the viewer's own files (assets.py). Every stored text goes through `esc` (model outputs and
observations are arbitrary text). A page that changes while a sweep writes wraps its body in
`<main id="live">`; the script polls the store's change token while the run is going and, when it
moved, fetches the same URL again as a fragment and swaps the body in (the fragment's X-Token says
which state it shows).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

from orchestrator.view.assets import CSS_PATH, ICON_PATH, JS_PATH

FOLD_CHARS, FOLD_LINES = 1200, 24  # longer texts are folded in <details>


def esc(value: object) -> str:
    return escape("" if value is None else str(value))


def name(value: object) -> str:
    """A model, strategy, task set or task name, escaped, which a narrow column may break after its
    slashes, underscores and dashes (rather than anywhere, or nowhere)."""
    return re.sub(r"([/_-])", r"\1<wbr>", esc(value))


def page(title: str, body: str, *, nav: str = "") -> str:
    search = ('<form method="get" action="/search" role="search"><input name="text" placeholder="search every store" '
              'aria-label="search every store"></form>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<link rel=\"icon\" href=\"{ICON_PATH}\" type=\"image/svg+xml\">\n"
            f"<link rel=\"stylesheet\" href=\"{CSS_PATH}\">\n"
            f"<script src=\"{JS_PATH}\" defer></script>\n</head>\n<body>\n"
            f"<nav class=\"top\"><a href=\"/\">stores</a>{nav}{search}</nav>\n{body}\n</body>\n</html>\n")


def live(body: str, token: str, token_url: str, running: bool) -> str:
    """A body the live script refreshes when the store's token moves, while a run is going."""
    return (f'<main id="live" data-token="{esc(token)}" data-token-url="{esc(token_url)}" '
            f'data-live="{1 if running else 0}">\n{body}\n</main>')


def link(href: str, text: object, **attrs: str) -> str:
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


def url(path: str, params: Mapping[str, object] | None = None) -> str:
    query = urlencode({k: str(v) for k, v in (params or {}).items() if v not in ("", None)})
    return f"{path}?{query}" if query else path


def table(header: Iterable[str] | None, rows: Iterable[Iterable[str]], table_id: str, names: int = 1, *,
          css: str = "", texts: Sequence[int] = (), head_html: Sequence[str] | None = None) -> str:
    """A table of cells that are already HTML (escape text with `esc` first); the first `names`
    columns are left-aligned, the columns in `texts` wrap as running text; no header row when
    `header` is None. `css`: classes of the table (`sortable`: its headers sort it in the page;
    `keys`: j/k select its rows; `list`: as wide as the page); `head_html`: headers already HTML."""
    def cell(i: int) -> str:
        return " class=text" if i in texts else " class=name" if i < names else ""

    def row(cells: Iterable[str], tag: str) -> str:
        return "<tr>" + "".join(f"<{tag}{cell(i)}>{c}</{tag}>" for i, c in enumerate(cells)) + "</tr>"
    body = "\n".join(row(r, "td") for r in rows)
    heads = head_html if head_html is not None else None if header is None else [esc(h) for h in header]
    head = "" if heads is None else f'<thead>{row(heads, "th")}</thead>\n'
    classes = f' class="{css}"' if css else ""
    return f'<div class="scroll"><table id="{table_id}"{classes}>\n{head}<tbody>\n{body}\n</tbody>\n</table></div>'


def folded(text: str | None, label: str, css_class: str = "") -> str:
    """A <pre> of `text`, inside a closed <details> when it is long."""
    if text is None:
        return f'<p class="muted">{esc(label)}: none</p>'
    pre = f'<pre class="{css_class}">{esc(text)}</pre>'
    lines = text.count("\n") + 1
    if len(text) <= FOLD_CHARS and lines <= FOLD_LINES:
        return f"<div><strong>{esc(label)}</strong>{pre}</div>"
    return (f"<details><summary><strong>{esc(label)}</strong> ({len(text):,} characters, {lines:,} lines)</summary>"
            f"{pre}</details>")


def when(timestamp: float | None) -> str:
    if not timestamp:
        return "—"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


def when_html(timestamp: float | None) -> str:
    """`when`, allowed to break between the date and the time in a narrow column."""
    return f'<span class="when">{esc(when(timestamp))}</span>'



def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def cost(value: float | None, unpriced: int) -> str:
    """What an episode's calls cost, where `unpriced` of them had no known price: the cost is then
    unknown (no call priced) or at least the priced ones' sum."""
    if not unpriced:
        return money(value)
    if value is None:
        return f"unknown: no price is known for its {unpriced} {plural(unpriced, 'call')}"
    return f"at least {money(value)}: {unpriced} of its calls had no known price"


def plural(count: int, word: str) -> str:
    """`word` as it follows the number `count` (an English plural in -s; one `word`, two `word`s)."""
    return word if count == 1 else f"{word}s"


def pager(page_no: int, pages: int, href_of: Callable[[int], str]) -> str:
    """Previous / page N of M / next; `href_of(n)` gives the URL of page n."""
    parts = [link(href_of(page_no - 1), "← previous", rel="prev") if page_no > 1 else ""]
    parts.append(f'<span id="page">page {page_no} of {pages}</span>')
    parts.append(link(href_of(page_no + 1), "next →", rel="next") if page_no < pages else "")
    return '<p class="pager">' + " ".join(p for p in parts if p) + "</p>"
