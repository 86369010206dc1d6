"""The viewer's aiohttp application: routes, answers, and serving it on a local address.

Each handler (routes.py, compare_routes.py) reads through its `Source`'s reader (the store's:
read-only, in worker threads) and renders HTML. A request that carries `X-Fragment: 1` (the live
script's) gets only the page's live body. Bad input (a URL parameter, a number out of range, a
parameter the page does not read: params.py) is a 400 page of one line; a locked store a 503 of one
line; a Host that is not this viewer's a 421 (security.py).

The server reads request lines as long as a browser sends (MAX_REQUEST_LINE, where aiohttp's own
limit is 8,190 bytes): a pasted traceback in a search then reaches the app, whose check of the
search's length answers with its own page and headers, rather than aiohttp answering in plain text
with a traceback in the terminal.
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from foundation.errors import ConfigError, UserError
from orchestrator.store.async_reader import StoreLocked
from orchestrator.view import compare_routes, routes
from orchestrator.view.answers import SOURCES, asset
from orchestrator.view.assets import CSS, CSS_PATH, ICON, ICON_PATH, JS, JS_PATH
from orchestrator.view.layout import esc, page
from orchestrator.view.params import FILTER, add_page, known_params
from orchestrator.view.security import add_headers, host_check
from orchestrator.view.source import Source, label_sources, share_indexes

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_REQUEST_LINE = 2 * 1024 * 1024 + 64  # Chromium's longest address (2 MiB), with the method and version


def make_app(sources: list[Source], host: str = "127.0.0.1") -> web.Application:
    label_sources(sources)
    share_indexes(sources)
    app = web.Application(middlewares=[host_check(host), _one_line_errors, known_params])
    app[SOURCES] = sources
    compare_routes.setup(app)
    add_page(app, "/", routes.index)
    add_page(app, "/search", routes.search_all, ("text",))
    add_page(app, "/s/{store}", routes.overview)
    add_page(app, "/s/{store}/token", routes.token)
    add_page(app, "/s/{store}/episodes", routes.episodes, (*FILTER, "format"))
    add_page(app, "/s/{store}/episodes/{episode}", routes.episode, (*FILTER, "format"))
    add_page(app, "/s/{store}/task", routes.task, ("task_id",))
    app.router.add_get(CSS_PATH, asset(CSS, "text/css"))
    app.router.add_get(JS_PATH, asset(JS, "text/javascript"))
    app.router.add_get(ICON_PATH, asset(ICON, "image/svg+xml"))
    app.on_response_prepare.append(add_headers)
    app.on_startup.append(_start_indexing)
    app.on_cleanup.append(_close_sources)
    return app


async def _start_indexing(app: web.Application) -> None:
    """Each store's full-text index is built in the background from the start (search.py)."""
    for keeper in {id(s.keeper): s.keeper for s in app[SOURCES]}.values():
        keeper.start()


async def _close_sources(app: web.Application) -> None:
    for source in app[SOURCES]:
        await source.aclose()


@asynccontextmanager
async def serving(sources: list[Source], host: str, port: int) -> AsyncIterator[str]:
    """Serve the stores on host:port (0: any free port) for the life of the block; yields the base URL.
    A port that cannot be bound is one ConfigError line."""
    runner = web.AppRunner(make_app(sources, host), access_log=None, handle_signals=False,
                           max_line_size=MAX_REQUEST_LINE)
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
    except web.HTTPNotFound as exc:
        return web.Response(status=404, text=page("not found", f'<p class="bad" id="error">{esc(exc.text)}</p>'),
                            content_type="text/html")
