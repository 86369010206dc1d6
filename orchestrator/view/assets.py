"""The viewer's one style sheet and one script, served from /static (the pages' Content-Security-Policy
allows scripts and styles from the viewer itself only, so nothing inline runs).

The script: live updates (an open page polls its store's change token every second and swaps in
the new body; it stops once the run has finished and the page shows its last state), sortable
tables (a click on a header of a table shown whole; paged lists sort on the server, by links),
and the keyboard: j/k select the previous or next row of a list, Enter or o opens it, n/p follow
the page's next and previous links (the next episode, page, or flipped task).
"""

from __future__ import annotations

import hashlib

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.2em auto; max-width: 1500px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin: .2em 0; overflow-wrap: anywhere; }
h2 { margin-top: 1.4em; border-bottom: 1px solid #ddd; font-size: 1.2em; } h3 { font-size: 1.05em; margin: .3em 0; }
nav.top { margin-bottom: .8em; display: flex; flex-wrap: wrap; gap: .4em 1em; align-items: center; }
nav.top form { margin-left: auto; } nav.top input { width: 16em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; vertical-align: top; }
td { white-space: nowrap; } th { background: #f2f2f2; white-space: normal; font-weight: 600; }
td.name, th.name { text-align: left; white-space: normal; overflow-wrap: break-word; }
th.text { text-align: left; }
td.text { text-align: left; white-space: normal; overflow-wrap: anywhere; min-width: 14em; width: 40%; }
table.list { width: 100%; } th a.sort { color: inherit; text-decoration: none; } th a.sort:hover { text-decoration: underline; }
th[aria-sort] { background: #e3ecf6; } table.sortable th { cursor: pointer; }
table.breakdown td.name { overflow-wrap: anywhere; } table.breakdown td:first-child { white-space: nowrap; }
tr.selected td { background: #fff4c2; } mark { background: #ffe066; padding: 0 1px; }
pre { background: #f7f7f7; border: 1px solid #e2e2e2; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere;
      margin: .3em 0; max-height: 40em; overflow-y: auto; font-size: 12.5px; }
.scroll { overflow-x: auto; max-width: 100%; } .muted { color: #777; } .bad { color: #b00020; } .good { color: #006b3c; }
.small { font-size: .85em; } .when { white-space: normal; }
.turn { border-left: 3px solid #0072B2; padding-left: .8em; margin: .6em 0; }
.message { border: 1px solid #ddd; border-radius: 4px; padding: .3em .6em; margin: .5em 0; background: #fff; }
.message .role { font-size: .8em; color: #555; font-weight: 600; }
.message.system { background: #f4f4f4; } .message.user { background: #f3f8fd; } .message.tool { background: #f4fbf4; }
.message.assistant { background: #fffaf0; border-color: #e7cf9c; }
.call { border-top: 1px solid #eee; padding-top: .3em; }
.exchange { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; align-items: start;
}
.exchange > div { min-width: 0; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; } .pair > div { min-width: 0; }
.aligned { display: grid; grid-template-columns: 3.5em minmax(0, 1fr) minmax(0, 1fr); gap: .3em 1em; }
.aligned > div { min-width: 0; border-top: 1px solid #e4e4e4; padding-top: .3em; } .aligned .head { font-weight: 600; border-bottom: 1px solid #ccc; }
.aligned .index { color: #555; font-weight: 600; padding-top: .4em; } .aligned .differs { background: #fff7f7; }
del.diff, ins.diff { text-decoration: none; } ins.diff { background: #c8f0c8; } del.diff { background: #ffd0d0; }
.turns-nav a { display: inline-block; min-width: 1.8em; text-align: center; margin: 1px; border-radius: 3px;
               border: 1px solid #ccc; text-decoration: none; color: #222; }
.turns-nav a.r1 { background: #b7e4c7; } .turns-nav a.r0 { background: #f5f5f5; } .turns-nav a.rp { background: #fde2b3; }
form.filters { display: flex; flex-wrap: wrap; gap: .6em; align-items: end; margin: .6em 0; }
form.filters label { display: flex; flex-direction: column; font-size: .85em; }
.chart { display: block; margin: .5em 0 1.5em; background: #fff; max-width: 100%; height: auto; }
.chart .title { font-weight: 600; font-size: 14px; } .chart .tick, .chart .legend { font-size: 11px; }
.chart .label { font-size: 12px; } .chart .grid { stroke: #e4e4e4; } .chart .whisker { stroke: #222; stroke-width: 1.2; }
.charts { display: flex; flex-wrap: wrap; gap: 0 1.5em; }
.warn { background: #fff3cd; border: 1px solid #e0c36a; padding: .4em 1em; }
.keys-help { color: #777; font-size: .8em; }
@media (max-width: 900px) { .exchange, .pair { grid-template-columns: minmax(0, 1fr); } }
/* The overview's charts: one per row, or two and more from 1,280 px; each chart as wide as its cell
   (charts.py draws in a viewBox, so the text scales with it). */
.chart-grid { display: grid; grid-template-columns: minmax(0, 640px); gap: 1.2em 1.5em; align-items: start;
              margin: .6em 0 1em; }
.chart-grid > * { min-width: 0; margin: 0; }
.chart-grid svg.chart { width: 100%; height: auto; margin: 0; }
.chart .group { font-size: 11px; font-weight: 600; fill: #555; }
.chart-values figcaption { font-weight: 600; } .chart-values p { margin: .2em 0; font-size: .85em; }
.chart-values table { margin: .3em 0 0; }
@media (min-width: 1280px) { .chart-grid { grid-template-columns: repeat(auto-fill, minmax(430px, 1fr)); } }
"""

JS = """
(function () {
  "use strict";
  const live = document.getElementById("live");
  let selected = -1;

  function follow() {
    if (!live || live.dataset.live !== "1") return;
    let token = live.dataset.token, busy = false;
    const timer = setInterval(async function () {
      if (busy) return;
      busy = true;
      try {
        const answer = await fetch(live.dataset.tokenUrl, {cache: "no-store"});
        const now = await answer.json();
        if (now.token !== token) {
          const page = await fetch(location.href, {cache: "no-store", headers: {"X-Fragment": "1"}});
          if (page.ok) {
            live.innerHTML = await page.text();
            token = page.headers.get("X-Token") || now.token;
            prepare();
          }
        }
        if (!now.live && token === now.token) clearInterval(timer);  // finished, and this is its last state
      } catch (e) {
        // the viewer may be restarting: the next tick tries again
      } finally {
        busy = false;
      }
    }, 1000);
  }

  function cellValue(row, index) {
    const text = (row.cells[index] ? row.cells[index].textContent : "").trim();
    const number = parseFloat(text.replace(/[$,%]/g, ""));
    return /^[-+$]?[0-9.,]+%?/.test(text) && !isNaN(number) ? number : text.toLowerCase();
  }

  function sortBy(table, th) {
    const index = Array.prototype.indexOf.call(th.parentNode.children, th);
    const up = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort(function (a, b) {
      const x = cellValue(a, index), y = cellValue(b, index);
      const order = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
      return up ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  function rows() { return Array.from(document.querySelectorAll("table.keys tbody tr")); }

  function select(index) {
    const all = rows();
    if (!all.length) return;
    selected = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (row, i) { row.classList.toggle("selected", i === selected); });
    all[selected].scrollIntoView({block: "nearest"});
  }

  function prepare() {
    if (selected >= 0) select(selected);
  }

  document.addEventListener("click", function (event) {
    const th = event.target.closest && event.target.closest("table.sortable thead th");
    if (th) sortBy(th.closest("table"), th);
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest("input, select, textarea, button")) return;
    const key = event.key;
    if (key === "j" || key === "k") {
      select(selected < 0 ? 0 : selected + (key === "j" ? 1 : -1));
    } else if ((key === "Enter" || key === "o") && selected >= 0) {
      const link = rows()[selected] && rows()[selected].querySelector("a");
      if (link) location.href = link.href;
    } else if (key === "n" || key === "p") {
      const link = document.querySelector(key === "n" ? "a[rel=next]" : "a[rel=prev]");
      if (link) location.href = link.href;
    } else {
      return;
    }
    event.preventDefault();
  });

  prepare();
  follow();
})();
"""

# The list's filters choose a cell's parts from the store's values: a long model name must not widen the form.
CSS += "form.filters select { max-width: 18em; }\n"

CSS += """
/* The episode's timeline (episode_timeline.py): a row per turn, a bar per span on the episode's scale. */
.timeline { margin: .4em 0 1em; } .timeline .small { color: #555; }
.tl-row { display: grid; grid-template-columns: 4.5em minmax(0, 1fr) minmax(14em, 26em); gap: .6em; align-items: center;
          margin: 2px 0; }
.tl-track { display: block; width: 100%; height: 14px; background: #f4f4f4; border: 1px solid #e2e2e2; }
.tl-key { display: inline-block; width: 20px; height: 14px; margin: 0 .3em 0 .6em; vertical-align: middle; }
.tl-call { fill: #0072B2; } .tl-action { fill: #E69F00; } .tl-reward { fill: #009E73; }
.tl-label { font-size: .85em; } .tl-words { color: #444; }
.rewritten { border-left: 3px solid #CC79A7; padding-left: .5em; margin: .3em 0; }
"""

# Versioned by content, so a browser never runs an old script against a new page.
VERSION = hashlib.sha256((CSS + JS).encode()).hexdigest()[:12]
CSS_PATH, JS_PATH = f"/static/view-{VERSION}.css", f"/static/view-{VERSION}.js"

# The viewer's icon, an SVG served where a browser asks for one (/favicon.ico, which it does on
# opening any page that names none: a 404 otherwise) and named in every page's head (layout.py).
ICON_PATH = "/favicon.ico"
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
        'fill="#0072B2"/><path d="M3 11.5 6.5 7l3 2.5L13 4" fill="none" stroke="#fff" stroke-width="1.8"/></svg>')
