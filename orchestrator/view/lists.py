"""An episode list as a table (headers that sort it, rows that j/k select) and as a download (CSV,
JSON), and the snippets that show where searched words occur in an episode."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence

from foundation.outcome import Status
from orchestrator.store.episode_query import EpisodeFilter, EpisodeRow, EpisodeTexts
from orchestrator.store.search_query import words
from orchestrator.view.layout import esc, link, money, name, url

FORMATS = ("csv", "json")
TEXT_PREVIEW = 140  # characters of a task's query in a list
SNIPPET = 70  # characters either side of a word found
# column -> (header, its sort, the other way)
COLUMNS = (("id", "newest", "oldest"), ("task", "task", "task-desc"), ("cell", "cell", "cell-desc"),
           ("status", "status", "status-desc"), ("reward", "reward", "reward-asc"), ("turns", "turns", "turns-asc"),
           ("tokens", "tokens", "tokens-asc"), ("cost", "cost", "cost-asc"))
ASCENDING_FIRST = ("task", "cell", "status")  # the columns sorted A to Z first; the others largest first


def episode_href(index: int, episode_id: int, flt: EpisodeFilter | None = None) -> str:
    """An episode's page, carrying the list it was opened from (its previous and next are that list's)."""
    return url(f"/s/{index}/episodes/{episode_id}", flt.params(page=1) if flt else None)


def task_href(index: int, task_id: str) -> str:
    return url(f"/s/{index}/task", {"task_id": task_id})


def list_table(source: object, flt: EpisodeFilter, rows: Sequence[EpisodeRow], snippets: dict[int, str]) -> str:
    index = getattr(source, "index")
    base = f"/s/{index}/episodes"
    heads = [_head(base, flt, *column) for column in COLUMNS]
    heads.append(f'<th class="text">{"where the words occur" if flt.text else "query"}</th>')
    body = []
    for r in rows:
        last = snippets.get(r.id, "") if flt.text else f'<span class="query">{esc(_preview(r.query))}</span>'
        body.append(
            f'<tr><td class="name">{link(episode_href(index, r.id, flt), r.id, class_="episode")}</td>'
            f'<td class="name">{link(task_href(index, r.task_id), r.task_id, class_="task")} '
            f'<span class="muted small">epoch {r.epoch}</span></td>'
            f'<td class="name">{name(f"{r.model} / {r.strategy} / {r.task_set}")}</td>'
            f'<td class="name">{status_html(r.status)}{_error(r.failure_class)}</td><td>{r.reward:.2f}</td>'
            f"<td>{r.n_turns}</td><td>{r.tokens:,}</td><td>{money(r.cost_usd)}</td>"
            f'<td class="text">{last}</td></tr>')
    return (f'<div class="scroll"><table id="episodes" class="list keys"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _head(base: str, flt: EpisodeFilter, column: str, first: str, other: str) -> str:
    """A header that sorts the list by its column: its usual way first, the other way when it is
    the order already."""
    target = other if flt.sort == first else first
    sort, arrow = "", ""
    if flt.sort in (first, other):
        descending = (flt.sort == first) == (first not in ASCENDING_FIRST)
        sort, arrow = f' aria-sort="{"descending" if descending else "ascending"}"', " ▼" if descending else " ▲"
    return f'<th class="name"{sort}>{link(url(base, flt.params(sort=target, page=1)), column + arrow, class_="sort")}</th>'


def _error(failure: str | None) -> str:
    return f' <span class="muted small">{esc(failure)} error</span>' if failure else ""


def status_html(status: str) -> str:
    css = "good" if status == Status.SOLVED else "bad" if status.endswith("error") or status == Status.TIMEOUT else ""
    return f'<span class="status {css}">{esc(status)}</span>'


def _preview(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= TEXT_PREVIEW else one_line[:TEXT_PREVIEW - 1] + "…"


def download(rows: Sequence[EpisodeRow], fmt: str) -> tuple[str, str]:
    """(body, content type) of a list as CSV or JSON: every field of every row."""
    records = [r.flat() for r in rows]
    if fmt == "json":
        return json.dumps(records, indent=1), "application/json"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EpisodeRow.flat_names())
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue(), "text/csv"


def snippets(texts: Mapping[int, EpisodeTexts], text: str, index: int) -> dict[int, str]:
    """For each episode, where the search's words occur: the first few places (the task's query, a
    turn's output, action or observation, then the error, the gold and the prompts), each a short
    piece of text with the words marked and a link to the turn or the page."""
    pattern = _pattern(text)
    if pattern is None or not texts:
        return {}
    found: dict[int, str] = {}
    for eid, episode in texts.items():
        pieces: list[str] = []
        _add(pieces, pattern, episode.query, "task", "")
        for idx, *values in episode.turns:
            for field, value in zip(("output", "action", "observation"), values, strict=True):
                if len(pieces) < 3:
                    _add(pieces, pattern, value, f"turn {idx + 1} {field}", f"{episode_href(index, eid)}#turn-{idx + 1}")
        for where, value in (("error", episode.error), ("gold", episode.gold), ("prompt", episode.prompts)):
            _add(pieces, pattern, value, where, episode_href(index, eid))
        found[eid] = "<br>".join(pieces)
    return found


def _pattern(text: str) -> re.Pattern[str] | None:
    terms = words(text)
    return re.compile("|".join(re.escape(t) for t in sorted(set(terms), key=len, reverse=True)), re.I) if terms else None


def _add(pieces: list[str], pattern: re.Pattern[str], value: str | None, where: str, href: str) -> None:
    match = pattern.search(value or "") if value and len(pieces) < 3 else None
    if match is None:
        return
    start, end = max(0, match.start() - SNIPPET), min(len(value or ""), match.end() + SNIPPET)
    piece = " ".join((value or "")[start:end].split())
    marked = pattern.sub(lambda m: f"\0{m.group(0)}\1", piece)
    html = esc(marked).replace("\0", "<mark>").replace("\1", "</mark>")
    label = link(href, where) if href else esc(where)
    pieces.append(f'<span class="snippet"><span class="muted small">{label}:</span> '
                  f'{"…" if start else ""}{html}{"…" if end < len(value or "") else ""}</span>')
