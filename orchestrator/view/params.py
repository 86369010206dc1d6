"""What each page's address may carry. A parameter no page reads (a misspelt filter, `epoch` where
the epoch is no filter) would be ignored, and the page show more than was asked for without a word:
it is one line instead, a 400 naming it and the parameters the page reads.

Each page is added with the parameters its handler reads (`add_page`), so the table is made where
the routes are; a route added otherwise (the static files) is not checked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import fields

from aiohttp import web

from foundation.errors import ConfigError
from orchestrator.store.episode_query import EpisodeFilter

FILTER = tuple(f.name for f in fields(EpisodeFilter))  # an episode list's filter, order and page
PARAMS = web.AppKey("params", dict[str, tuple[str, ...]])  # a page's path (as routed) -> what it reads
SHOWN = 5  # unknown names quoted in the line, at most
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_page(app: web.Application, path: str, handler: Handler, params: Sequence[str] = ()) -> None:
    """A GET route whose address may carry `params` and nothing else."""
    app.router.add_get(path, handler)
    if PARAMS not in app:
        app[PARAMS] = {}
    app[PARAMS][path] = tuple(params)


def check(query: Mapping[str, str], known: Sequence[str]) -> None:
    """ConfigError naming the parameters of `query` that are not `known`."""
    unknown = [name for name in dict.fromkeys(query) if name not in known]
    if not unknown:
        return
    names = ", ".join(repr(name[:40]) for name in unknown[:SHOWN]) + (" and more" if len(unknown) > SHOWN else "")
    reads = f"reads {', '.join(known)}" if known else "reads no parameter"
    raise ConfigError(f"unknown parameter{'s' if len(unknown) > 1 else ''} {names}: this page {reads}")


@web.middleware
async def known_params(request: web.Request, handler: Handler) -> web.StreamResponse:
    resource = request.match_info.route.resource
    known = request.app[PARAMS].get(resource.canonical) if resource is not None and PARAMS in request.app else None
    if known is not None:
        check(request.query, known)
    return await handler(request)
