"""What every handler answers with: a page (or its live fragment), a store looked up by number, a
download, the static files."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from orchestrator.store.episode_query import MAX_ID
from orchestrator.view.layout import link, live, page
from orchestrator.view.source import Source

SOURCES = web.AppKey("sources", list[Source])


def html(request: web.Request, title: str, body: str, token: str | None = None, token_url: str = "",
         nav: str = "", above: str = "", running: bool = False) -> web.Response:
    """The page, or only its live body when the live script asks for a fragment; `above` stays put
    over the live body (a form being typed into is never swapped)."""
    if token is not None:
        if request.headers.get("X-Fragment") == "1":
            return web.Response(text=body, content_type="text/html", headers={"X-Token": token})
        body = live(body, token, token_url, running)
    return web.Response(text=page(title, above + body, nav=nav), content_type="text/html")


def source_of(request: web.Request, key: str = "store", value: str | None = None) -> Source:
    sources = request.app[SOURCES]
    text = request.match_info.get(key, "") if value is None else value
    if not (text.isascii() and text.isdigit()) or int(text) >= len(sources):
        raise web.HTTPNotFound(text=f"no store {text[:40]!r}: there are {len(sources)}")
    return sources[int(text)]


def episode_id(text: str, source: Source) -> int:
    """An episode id from a URL; a number no episode can have is "no episode", never an overflow."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_ID:
        raise web.HTTPNotFound(text=f"no episode {text[:40]!r} in {source.path}")
    return int(text)


def nav(source: Source) -> str:
    return f" {link(f'/s/{source.index}', source.label)}"


def download(body: str, content_type: str, name: str) -> web.Response:
    return web.Response(text=body, content_type=content_type,
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


def asset(text: str, content_type: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A handler serving a static text; its path carries its version, so it may be cached for long."""
    async def serve(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type=content_type,
                            headers={"Cache-Control": "public, max-age=31536000, immutable"})
    return serve


def query_cell(query: Any) -> tuple[str, str, str]:
    return query.get("model", ""), query.get("strategy", ""), query.get("task_set", "")
