"""The handlers of one store's pages, and of the search of every store."""

from __future__ import annotations


from aiohttp import web

from foundation.concurrency import all_of
from foundation.errors import ConfigError
from orchestrator.store.episode_export import episode_json, inspect_sample
from orchestrator.store.export import safe_name
from orchestrator.store.episode_query import PAGE_SIZE, EpisodeFilter, EpisodePage
from orchestrator.view import find_pages, pages
from orchestrator.view.compare_pages import compare_url
from orchestrator.view.answers import SOURCES, download, episode_id, html, nav, source_of
from orchestrator.view.episode_page import episode as episode_html
from orchestrator.view.filters import check_cell, filter_form, store_values
from orchestrator.view.layout import esc, link, table
from orchestrator.view.lists import FORMATS, episode_href, snippets
from orchestrator.view.lists import download as list_download
from orchestrator.view.source import Source, running, token_text


async def index(request: web.Request) -> web.StreamResponse:
    sources = request.app[SOURCES]
    if len(sources) == 1:
        raise web.HTTPFound("/s/0")
    rows = [[link(f"/s/{s.index}", s.label), esc(s.path)] for s in sources]
    body = f"<h1>Stores</h1>{table(('sweep', 'results'), rows, 'stores', names=2, css='keys')}"
    pairs = [link(compare_url(sources[i], sources[j]), f"{sources[i].label} → {sources[j].label}")
             for i in range(len(sources)) for j in range(len(sources)) if i < j]
    body += "<h2>Side by side</h2><ul>" + "".join(f'<li class="compare">{p}</li>' for p in pairs) + "</ul>"
    return html(request, "stores", body)


async def overview(request: web.Request) -> web.StreamResponse:
    source = source_of(request)
    now = await source.overview()
    body = pages.overview(source, now)
    # A page whose statistics are behind carries a token no store has, so the live script asks again.
    page_token = token_text(now.token) + ("" if now.current else "~")
    return html(request, f"sweep {source.label}", body, page_token, f"/s/{source.index}/token", nav(source),
                running=running(now.token) or not now.current)


async def token(request: web.Request) -> web.StreamResponse:
    now = await source_of(request).token()
    return web.json_response({"token": token_text(now), "live": running(now)})


def _format(request: web.Request) -> str:
    fmt = request.query.get("format", "")
    if fmt not in ("", *FORMATS):
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, not {fmt[:20]!r}")
    return fmt


async def episodes(request: web.Request) -> web.StreamResponse:
    source = source_of(request)
    flt, fmt = EpisodeFilter.from_query(request.query), _format(request)
    now = await source.token()
    values = store_values(await source.cells(now))
    check_cell(flt, values)
    if fmt:
        rows, _ = await source.reader.all_rows(flt)
        return download(*list_download(rows, fmt), f"episodes.{fmt}")
    found, texts, note = await source.reader.episode_page(flt, texts_of=PAGE_SIZE)
    marks = snippets(texts, flt.text, source.index) if flt.text else {}
    body = pages.episode_list(source, flt, found, marks, note)
    return html(request, f"episodes of {source.label}", body, token_text(now), f"/s/{source.index}/token", nav(source),
                above=f"<h1>Episodes of {esc(source.label)}</h1>" + filter_form(source, flt, values),
                running=running(now))


EPISODE_FORMATS = {"json": (episode_json, ".json"), "inspect": (inspect_sample, ".inspect.json")}


async def episode(request: web.Request) -> web.StreamResponse:
    source = source_of(request)
    number = episode_id(request.match_info["episode"], source)
    if fmt := request.query.get("format", ""):
        return await _episode_file(source, number, fmt)
    flt = EpisodeFilter.from_query(request.query)
    detail, (before, after) = await source.reader.episode_in_list(number, flt)
    if detail is None:
        raise web.HTTPNotFound(text=f"no episode {number} in {source.path}")
    around = [link(episode_href(source.index, n, flt), text, rel=rel) for n, text, rel in
              ((before, "← previous episode", "prev"), (after, "next episode →", "next")) if n is not None]
    in_list = f" · {' · '.join(around)} <span class=\"keys-help\">(keys n/p)</span>" if around else ""
    return html(request, f"episode {number}", episode_html(source, detail, in_list), nav=nav(source))


async def _episode_file(source: Source, number: int, fmt: str) -> web.StreamResponse:
    """The episode as a file: everything stored of it as JSON, or as an Inspect sample."""
    if fmt not in EPISODE_FORMATS:
        raise ConfigError(f"format must be one of {', '.join(EPISODE_FORMATS)}, not {fmt[:20]!r}")
    write, suffix = EPISODE_FORMATS[fmt]
    body = await source.reader.call(lambda db: write(db, number))
    if body is None:
        raise web.HTTPNotFound(text=f"no episode {number} in {source.path}")
    return download(body, "application/json", f"{safe_name(source.label)}-episode-{number}{suffix}")


async def task(request: web.Request) -> web.StreamResponse:
    source = source_of(request)
    task_id = request.query.get("task_id", "")
    if not task_id:
        raise ConfigError("task_id is missing: /s/N/task?task_id=DATASET/INDEX")
    found = await source.reader.task_episodes(task_id)
    if found is None:
        raise web.HTTPNotFound(text=f"no episode of task {task_id[:80]!r} in {source.path}")
    elsewhere = [s for s in request.app[SOURCES] if s is not source]
    return html(request, f"task {task_id}", find_pages.task_page(source, task_id, found, elsewhere), nav=nav(source))


async def search_all(request: web.Request) -> web.StreamResponse:
    text = request.query.get("text", "").strip()
    sections = []
    if text:
        flt = EpisodeFilter.from_query({"text": text})
        sources = request.app[SOURCES]
        found = await all_of(_searched(s, flt) for s in sources)
        sections = [find_pages.search_section(s, text, *f) for s, f in zip(sources, found, strict=True)]
    return html(request, f"search {text}", find_pages.search_page(text, sections))


async def _searched(source: Source, flt: EpisodeFilter) -> tuple[EpisodePage, dict[int, str], str]:
    found, texts, note = await source.reader.episode_page(flt, texts_of=find_pages.SHOWN_PER_STORE)
    return found, snippets(texts, flt.text, source.index), note
