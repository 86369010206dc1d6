"""The handlers of two runs side by side: the comparison of two stores, a pair of episodes.

compare's verdicts (bootstraps) and the pairs of the two stores are computed once per state of
both stores and kept (keyed by their change tokens), so paging, a cell's pairs and the next
flipped task are read from memory.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from dataclasses import dataclass

from aiohttp import web

from foundation.errors import ConfigError
from orchestrator.nightly.compare import CompareSettings, Comparison, compare
from orchestrator.nightly.outcomes import from_episodes
from orchestrator.store.episode_pairs import Pair
from orchestrator.store.episode_query import MAX_PAGE, whole_number
from orchestrator.store.results import Results
from orchestrator.view import compare_pages
from orchestrator.view.answers import SOURCES, download, episode_id, html, query_cell, source_of
from orchestrator.view.filters import CELL_PARTS, check_parts
from orchestrator.view.lists import FORMATS
from orchestrator.view.pairs import Pairs, flipped_around, pair_page
from orchestrator.view.params import add_page
from orchestrator.view.source import Source, running, token_text


@dataclass(frozen=True)
class Compared:
    tokens: str  # both stores' change tokens when it was computed
    comparison: Comparison
    pairs: Pairs


COMPARED = web.AppKey("compared", dict[tuple[int, int], Compared])
COMPARE_SETTINGS = CompareSettings(resamples=2000)
CELL = ("model", "strategy", "task_set")  # a cell's parts, each a filter of the pairs (empty: any)


def setup(app: web.Application) -> None:
    app[COMPARED] = {}
    add_page(app, "/compare", comparison, ("a", "b", *CELL, "flipped", "page", "format"))
    add_page(app, "/compare/token", compare_token, ("a", "b"))
    add_page(app, "/compare/pair", pair, ("a", "b", "ea", "eb", *CELL))


def _pair_of(request: web.Request) -> tuple[Source, Source]:
    sources = request.app[SOURCES]
    if len(sources) < 2:
        raise ConfigError("side by side needs two stores: `python -m orchestrator view A B`")
    return (source_of(request, value=request.query.get("a", "0")),
            source_of(request, value=request.query.get("b", "1")))


async def _compared(request: web.Request, a: Source, b: Source) -> Compared:
    """compare's verdicts and the pairs of the two stores, computed again only when either changed."""
    first, second = await a.snapshot(), await b.snapshot()
    key, both = (a.index, b.index), f"{token_text(first.token)}/{token_text(second.token)}"
    cached = request.app[COMPARED].get(key)
    if cached is None or cached.tokens != both:
        result = await asyncio.to_thread(_compare, first.results, second.results)  # bootstraps: off the loop
        pairs = Pairs(await a.reader.pairs_with(b.path))
        request.app[COMPARED][key] = cached = Compared(both, result, pairs)
    return cached


def _compare(baseline: Results, current: Results) -> Comparison:
    return compare(from_episodes(baseline.episodes), from_episodes(current.episodes), COMPARE_SETTINGS)


async def comparison(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    q = request.query
    cell, flipped_only = query_cell(q), q.get("flipped", "") == "1"
    page_no = whole_number(q.get("page", "1"), "page", 1, MAX_PAGE)
    fmt = q.get("format", "")
    if fmt not in ("", *FORMATS):
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, not {fmt[:20]!r}")
    compared = await _compared(request, a, b)
    paired = {part: sorted({getattr(p, part) for p in compared.pairs.all}) for part in CELL_PARTS}
    check_parts(cell, paired, "the tasks both runs have")
    if fmt:
        return _download(compared.pairs, cell, flipped_only, fmt)
    found = pair_page(compared.pairs, cell, page_no, flipped_only)
    if page_no > found.pages:
        raise ConfigError(f"page {page_no} is past the last page, {found.pages}")
    body = compare_pages.comparison(a, b, compared.comparison, cell, found, page_no, flipped_only)
    live = running(await a.token()) or running(await b.token())
    return html(request, "side by side", body, compared.tokens, f"/compare/token?a={a.index}&b={b.index}",
                running=live)


def _download(pairs: Pairs, cell: tuple[str, str, str], flipped_only: bool, fmt: str) -> web.Response:
    rows = [p.flat() | {"change": p.change} for p in pairs.of(cell) if p.flipped or not flipped_only]
    if fmt == "json":
        return download(json.dumps(rows, indent=1), "application/json", "pairs.json")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*Pair.flat_names(), "change"])
    writer.writeheader()
    writer.writerows(rows)
    return download(out.getvalue(), "text/csv", "pairs.csv")


async def compare_token(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    first, second = await a.token(), await b.token()
    return web.json_response({"token": f"{token_text(first)}/{token_text(second)}",
                              "live": running(first) or running(second)})


async def pair(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    ea, eb = episode_id(request.query.get("ea", ""), a), episode_id(request.query.get("eb", ""), b)
    cell = query_cell(request.query)
    left = await a.reader.episode_detail(ea)
    right = await b.reader.episode_detail(eb)
    if left is None or right is None:
        raise web.HTTPNotFound(text="no such episode")
    tasks = left.fields["task_id"], right.fields["task_id"]
    if tasks[0] != tasks[1]:
        raise ConfigError(f"episode {ea} of A is of task {tasks[0]!r} and episode {eb} of B of task {tasks[1]!r}: "
                          "a pair is one task's two episodes, and these are of different tasks (open each on its own)")
    compared = await _compared(request, a, b)
    around = flipped_around(compared.pairs, cell, ea, eb)
    return html(request, "side by side", compare_pages.side_by_side(a, b, left, right, around, cell))
