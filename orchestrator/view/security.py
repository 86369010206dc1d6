"""What keeps the viewer's pages to its user: the Host header checked, and headers on every answer.

DNS rebinding: a web page of another site can make its name resolve to 127.0.0.1 and then read
this viewer as "its own" origin. The browser still sends that site's name in `Host`, so a request
is served only when `Host` names this viewer: an IP address (a rebinding needs a name), `localhost`,
or the host it was told to listen on. Anything else is one line, 421.

Every answer carries a Content-Security-Policy that lets a page load only the viewer's own script
and style sheet (an observation that holds HTML is escaped anyway; the policy is the second
wall), and `X-Content-Type-Options: nosniff`, so no answer is read as another type than it says.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from orchestrator.view.layout import esc, page

POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
          "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY"}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def host_name(host_header: str) -> str:
    """The name part of a Host header: without the port, an IPv6 address without its brackets."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def allowed_host(host_header: str, listening_on: str) -> bool:
    """Whether a request with this Host header is for this viewer (see the module's docstring)."""
    name = host_name(host_header.strip()).lower().rstrip(".")
    if not name:
        return False
    if name in ("localhost", listening_on.lower()):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_check(listening_on: str) -> Middleware:
    """A middleware answering 421 to a request whose Host is not this viewer's."""
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        if not allowed_host(host, listening_on):
            text = (f"this viewer answers to its own address only, not to the host {host!r}: open it as "
                    f"http://127.0.0.1 or http://localhost with its port")
            return web.Response(status=421, text=page("wrong host", f'<p class="bad" id="error">{esc(text)}</p>'),
                                content_type="text/html")
        return await handler(request)
    return check


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the security headers on every answer, errors and files included."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
