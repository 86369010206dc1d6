"""The page shell every view shares: inline CSS, the live-update script, links and small widgets.

Plain server-rendered HTML: no external resource, no build step. Every stored text goes through
`esc` (model outputs and observations are arbitrary text). A page that changes while a sweep
writes wraps its body in `<main id="live">`; the script polls the store's change token every
second and, when it moved, fetches the same URL again as a fragment and swaps the body in (the
fragment's X-Token says which state it shows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

FOLD_CHARS, FOLD_LINES = 1200, 24  # longer texts are folded in <details>

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.2em auto; max-width: 1500px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin: .2em 0; } h2 { margin-top: 1.4em; border-bottom: 1px solid #ddd; font-size: 1.2em; }
nav { margin-bottom: .8em; } nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; white-space: nowrap; vertical-align: top; }
th { background: #f2f2f2; } td.name, th.name, td.text { text-align: left; }
td.text { white-space: normal; max-width: 50em; overflow-wrap: anywhere; }
pre { background: #f7f7f7; border: 1px solid #e2e2e2; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere;
      margin: .3em 0; max-height: 40em; overflow-y: auto; }
.scroll { overflow-x: auto; } .muted { color: #777; } .bad { color: #b00020; } .good { color: #006b3c; }
.turn { border-left: 3px solid #0072B2; padding-left: .8em; margin: 1em 0; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; } .pair > div { min-width: 0; }
form.filters { display: flex; flex-wrap: wrap; gap: .6em; align-items: end; margin: .6em 0; }
form.filters label { display: flex; flex-direction: column; font-size: .85em; }
.chart { display: block; margin: .5em 0 1.5em; background: #fff; }
.chart .title { font-weight: 600; font-size: 14px; } .chart .tick, .chart .legend { font-size: 11px; }
.chart .label { font-size: 12px; } .chart .grid { stroke: #e4e4e4; } .chart .whisker { stroke: #222; stroke-width: 1.2; }
.warn { background: #fff3cd; border: 1px solid #e0c36a; padding: .4em 1em; }
"""

LIVE_SCRIPT = """
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  let token = live.dataset.token, busy = false;
  setInterval(async function () {
    if (busy) return;
    busy = true;
    try {
      const answer = await fetch(live.dataset.tokenUrl, {cache: "no-store"});
      const now = (await answer.json()).token;
      if (now !== token) {
        const page = await fetch(location.href, {cache: "no-store", headers: {"X-Fragment": "1"}});
        if (page.ok) { live.innerHTML = await page.text(); token = page.headers.get("X-Token") || now; }
      }
    } catch (e) {
      // the viewer may be restarting: the next tick tries again
    } finally {
      busy = false;
    }
  }, 1000);
})();
"""


def esc(value: object) -> str:
    return escape("" if value is None else str(value))


def page(title: str, body: str, *, nav: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            f"<nav><a href=\"/\">stores</a>{nav}</nav>\n{body}\n<script>{LIVE_SCRIPT}</script>\n</body>\n</html>\n")


def live(body: str, token: str, token_url: str) -> str:
    """A body the live script refreshes when the store's token moves."""
    return f'<main id="live" data-token="{esc(token)}" data-token-url="{esc(token_url)}">\n{body}\n</main>'


def link(href: str, text: object, **attrs: str) -> str:
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


def url(path: str, params: Mapping[str, object] | None = None) -> str:
    query = urlencode({k: str(v) for k, v in (params or {}).items() if v not in ("", None)})
    return f"{path}?{query}" if query else path


def table(header: Iterable[str] | None, rows: Iterable[Iterable[str]], table_id: str, names: int = 1) -> str:
    """A table of cells that are already HTML (escape text with `esc` first); the first `names`
    columns are left-aligned; no header row when `header` is None."""
    def row(cells: Iterable[str], tag: str) -> str:
        return "<tr>" + "".join(f'<{tag}{" class=name" if i < names else ""}>{c}</{tag}>'
                                for i, c in enumerate(cells)) + "</tr>"
    body = "\n".join(row(r, "td") for r in rows)
    head = "" if header is None else f'<thead>{row((esc(h) for h in header), "th")}</thead>\n'
    return f'<div class="scroll"><table id="{table_id}">\n{head}<tbody>\n{body}\n</tbody>\n</table></div>'


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


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def pager(page_no: int, pages: int, href_of: Callable[[int], str]) -> str:
    """Previous / page N of M / next; `href_of(n)` gives the URL of page n."""
    parts = [link(href_of(page_no - 1), "← previous", rel="prev") if page_no > 1 else ""]
    parts.append(f'<span id="page">page {page_no} of {pages}</span>')
    parts.append(link(href_of(page_no + 1), "next →", rel="next") if page_no < pages else "")
    return '<p class="pager">' + " ".join(p for p in parts if p) + "</p>"
