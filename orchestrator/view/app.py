"""The viewer's aiohttp application: routes, and serving it on a local address.

Each handler reads through `Source` (read-only, in worker threads) and renders with pages.py. A
request that carries `X-Fragment: 1` (the live script's) gets only the page's live body. A bad
URL parameter is a 400 page of one line; a locked store a 503 of one line.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from foundation.errors import ConfigError, UserError
from orchestrator.nightly.compare import CompareSettings, Comparison, compare
from orchestrator.nightly.outcomes import from_episodes
from orchestrator.report.data import Results
from orchestrator.view import compare_pages, pages
from orchestrator.view.layout import esc, link, live, page, table
from orchestrator.view.pairs import pair_page
from orchestrator.view.queries import EpisodeFilter, episode_detail, episode_page
from orchestrator.view.source import Source, StoreLocked, token_text

SOURCES = web.AppKey("sources", list[Source])
COMPARISONS = web.AppKey("comparisons", dict[tuple[int, int], tuple[str, Comparison]])
COMPARE_SETTINGS = CompareSettings(resamples=2000)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(sources: list[Source]) -> web.Application:
    app = web.Application(middlewares=[_one_line_errors])
    app[SOURCES] = sources
    app[COMPARISONS] = {}
    app.router.add_get("/", index)
    app.router.add_get("/s/{store}", overview)
    app.router.add_get("/s/{store}/token", token)
    app.router.add_get("/s/{store}/episodes", episodes)
    app.router.add_get("/s/{store}/episodes/{episode}", episode)
    app.router.add_get("/compare", comparison)
    app.router.add_get("/compare/token", compare_token)
    app.router.add_get("/compare/pair", pair)
    app.on_cleanup.append(_close_sources)
    return app


async def _close_sources(app: web.Application) -> None:
    for source in app[SOURCES]:
        await source.aclose()


@asynccontextmanager
async def serving(sources: list[Source], host: str, port: int) -> AsyncIterator[str]:
    """Serve the stores on host:port (0: any free port) for the life of the block; yields the base URL.
    A port that cannot be bound is one ConfigError line."""
    runner = web.AppRunner(make_app(sources), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use: choose another with --port (0: any free port)") from None
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
        bound = runner.addresses[0][1]
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


@web.middleware
async def _one_line_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except UserError as exc:
        status = 503 if isinstance(exc, StoreLocked) else 400
        return web.Response(status=status, text=page("error", f'<p class="bad" id="error">{esc(exc)}</p>'),
                            content_type="text/html")


def _html(request: web.Request, title: str, body: str, token: str | None = None, token_url: str = "",
          nav: str = "", above: str = "") -> web.Response:
    """The page, or only its live body when the live script asks for a fragment; `above` stays put
    over the live body (a form being typed into is never swapped)."""
    if token is not None:
        if request.headers.get("X-Fragment") == "1":
            return web.Response(text=body, content_type="text/html", headers={"X-Token": token})
        body = live(body, token, token_url)
    return web.Response(text=page(title, above + body, nav=nav), content_type="text/html")


def _source(request: web.Request, key: str = "store", value: str | None = None) -> Source:
    sources = request.app[SOURCES]
    text = request.match_info.get(key, "") if value is None else value
    if not text.isdigit() or int(text) >= len(sources):
        raise web.HTTPNotFound(text=f"no store {text!r}: there are {len(sources)}")
    return sources[int(text)]


def _nav(source: Source) -> str:
    return f" {link(f'/s/{source.index}', source.sweep)}"


async def index(request: web.Request) -> web.StreamResponse:
    sources = request.app[SOURCES]
    if len(sources) == 1:
        raise web.HTTPFound("/s/0")
    rows = [[link(f"/s/{s.index}", s.sweep), esc(s.path)] for s in sources]
    body = f"<h1>Stores</h1>{table(('sweep', 'results'), rows, 'stores', names=2)}"
    pairs = [link(compare_pages.compare_url(sources[i], sources[j]), f"{sources[i].sweep} → {sources[j].sweep}")
             for i in range(len(sources)) for j in range(len(sources)) if i < j]
    body += "<h2>Side by side</h2><ul>" + "".join(f'<li class="compare">{p}</li>' for p in pairs) + "</ul>"
    return _html(request, "stores", body)


async def overview(request: web.Request) -> web.StreamResponse:
    source = _source(request)
    now = await source.overview()
    body = pages.overview(source, now)
    # A page whose statistics are behind carries a token no store has, so the live script asks again.
    page_token = token_text(now.token) + ("" if now.current else "~")
    return _html(request, f"sweep {source.sweep}", body, page_token, f"/s/{source.index}/token", _nav(source))


async def token(request: web.Request) -> web.StreamResponse:
    return web.json_response({"token": token_text(await _source(request).token())})


async def episodes(request: web.Request) -> web.StreamResponse:
    source = _source(request)
    flt = EpisodeFilter.from_query(request.query)
    now = token_text(await source.token())
    found = await source.call(lambda db: episode_page(db, flt))
    body = pages.episode_list(source, flt, found)
    return _html(request, f"episodes of {source.sweep}", body, now, f"/s/{source.index}/token", _nav(source),
                 above=f"<h1>Episodes of {esc(source.sweep)}</h1>" + pages.filter_form(source, flt))


async def episode(request: web.Request) -> web.StreamResponse:
    source = _source(request)
    episode_id = request.match_info["episode"]
    detail = await source.call(lambda db: episode_detail(db, int(episode_id))) if episode_id.isdigit() else None
    if detail is None:
        raise web.HTTPNotFound(text=f"no episode {episode_id} in {source.path}")
    return _html(request, f"episode {episode_id}", pages.episode(source, detail), nav=_nav(source))


def _pair_of(request: web.Request) -> tuple[Source, Source]:
    sources = request.app[SOURCES]
    if len(sources) < 2:
        raise ConfigError("side by side needs two stores: `python -m orchestrator view A B`")
    a = _source(request, value=request.query.get("a", "0"))
    b = _source(request, value=request.query.get("b", "1"))
    return a, b


async def _comparison(request: web.Request, a: Source, b: Source) -> tuple[str, Comparison]:
    """compare's verdicts for the two stores, computed again only when either store changed."""
    first, second = await a.snapshot(), await b.snapshot()
    key, both = (a.index, b.index), f"{token_text(first.token)}/{token_text(second.token)}"
    cached = request.app[COMPARISONS].get(key)
    if cached is None or cached[0] != both:
        result = await asyncio.to_thread(_compare, first.results, second.results)  # bootstraps: off the loop
        request.app[COMPARISONS][key] = cached = (both, result)
    return cached


def _compare(baseline: Results, current: Results) -> Comparison:
    return compare(from_episodes(baseline.episodes), from_episodes(current.episodes), COMPARE_SETTINGS)


async def comparison(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    q = request.query
    cell = (q.get("model", ""), q.get("strategy", ""), q.get("task_set", ""))
    page_text, flipped_only = q.get("page", "1"), q.get("flipped", "") == "1"
    if not page_text.isdigit() or int(page_text) < 1:
        raise ConfigError(f"page must be a whole number from 1, not {page_text!r}")
    both, result = await _comparison(request, a, b)
    found = await a.call(lambda db: pair_page(db, b.path, cell, int(page_text), flipped_only))
    body = compare_pages.comparison(a, b, result, cell, found, int(page_text), flipped_only)
    return _html(request, "side by side", body, both, f"/compare/token?a={a.index}&b={b.index}")


async def compare_token(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    return web.json_response({"token": f"{token_text(await a.token())}/{token_text(await b.token())}"})


async def pair(request: web.Request) -> web.StreamResponse:
    a, b = _pair_of(request)
    ids: dict[str, Any] = {k: request.query.get(k, "") for k in ("ea", "eb")}
    if not all(v.isdigit() for v in ids.values()):
        raise ConfigError("ea and eb must be episode ids")
    left = await a.call(lambda db: episode_detail(db, int(ids["ea"])))
    right = await b.call(lambda db: episode_detail(db, int(ids["eb"])))
    if left is None or right is None:
        raise web.HTTPNotFound(text="no such episode")
    return _html(request, "side by side", compare_pages.side_by_side(a, b, left, right))
