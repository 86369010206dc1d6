"""The MCP servers a task offers its agent (Harbor's `[[environment.mcp_servers]]`), as tools a
model can call: each server's tools listed once at the start, offered in OpenAI's function format
as `<server>__<tool>`, and called through the official `mcp` client.

    async with McpTools(env.tool_servers(), timeout=30) as tools:   # ToolServerError: one line
        offered = tools.schemas                                      # beside the kind's own tools
        text = await tools.call("search__lookup", {"q": "cats"})     # the result, as text

Every wait on the network has a deadline: connecting, initializing and listing (`timeout`), each
call (`call_timeout`), ending the session when leaving (LEAVE_TIMEOUT). A server that can't be
reached, does not answer in time or drops the connection is a `ToolServerError` naming it and its
URL; a tool that reports an error (the result's `isError`), or a server that refuses a call, is
text for the model, not an exception.

The client's context managers (its transport's and session's task groups) are entered in
`__aenter__` and left in `__aexit__`, in the task that holds the `async with`; that task owns
what they start. A request's network failure would end its task inside the client's task group,
and so cancel the task holding it (the episode's) at whatever it awaits: the HTTP transport given
to the client answers such a failure as a JSON-RPC error instead (`_Guarded`), which the client
hands to the call that made the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import httpx2

from environments.base import TaskUnavailable, ToolServer

if TYPE_CHECKING:  # the client itself is imported where a server is reached: a second of CPU that a
    # process without MCP servers (most sweeps, every LLM worker) never spends
    from mcp import ClientSession
    from mcp import types as mcp_types

CONNECT_TIMEOUT = 30.0  # seconds to connect to a server, initialize the session and list its tools
CALL_TIMEOUT = 300.0  # seconds one tool call may take
SSE_PING = 60.0  # seconds an SSE stream may stay silent (servers ping it every 15 s)
LEAVE_TIMEOUT = 5.0  # seconds for ending a session when the episode leaves (its DELETE)
MAX_PAGES = 20  # pages of a server's tool listing read
NAME = re.compile(r"[^A-Za-z0-9_-]")
NAME_LIMIT = 64  # characters of a function name providers accept
DESCRIPTION_LIMIT = 1024
RESULT_LIMIT = 64 * 1024  # characters of a tool's result kept (as an action's output is capped)
RESPONSE_LIMIT = 16 << 20  # bytes of one response of a server read at most (an SSE stream: all of them)
UNREACHABLE = -32098  # the JSON-RPC error code of a request the network failed (_Guarded)
ACTION = "mcp:"  # how a call is written as a turn's action: mcp:<server>.<tool> {arguments}


class ToolServerError(TaskUnavailable):
    """A task's MCP server that can't be reached, did not answer within its deadline, or dropped the
    connection; its message is one line naming the server and its URL."""


@dataclass(frozen=True)
class _Tool:
    server: ToolServer
    tool: str  # the tool's own name, on its server
    session: ClientSession
    schema: dict[str, Any]  # as offered to the model


class McpTools:
    """The tools of a task's MCP servers, for one episode (`async with`: connected, then closed)."""

    def __init__(self, servers: Sequence[ToolServer], *, timeout: float = CONNECT_TIMEOUT,
                 call_timeout: float = CALL_TIMEOUT) -> None:
        self.servers, self.timeout, self.call_timeout = list(servers), timeout, call_timeout
        self._tools: dict[str, _Tool] = {}
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> Self:
        self._stack = AsyncExitStack()
        try:
            for server in self.servers:
                await self._connect(server)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        stack, self._stack = self._stack, None
        self._tools = {}
        if stack is not None:
            await stack.aclose()

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """Every server's tools in OpenAI's function format, in the servers' order."""
        return [tool.schema for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def action(self, name: str, arguments: dict[str, Any]) -> str:
        """The call as a turn's action: `mcp:<server>.<tool> {arguments}`."""
        tool = self._tools[name]
        return f"{ACTION}{tool.server.name}.{tool.tool} {json.dumps(arguments, ensure_ascii=False)}"

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call the tool offered as `name` and return its result as text (a tool's error too);
        ToolServerError when its server does not answer within `call_timeout`."""
        if self._stack is None:
            raise RuntimeError("McpTools.call outside its `async with`")
        from mcp import MCPError
        from mcp import types as mcp_types

        tool = self._tools[name]
        try:
            with anyio.fail_after(self.call_timeout):
                result = await tool.session.call_tool(tool.tool, arguments)
        except TimeoutError:
            raise _error(tool.server, f"did not answer a call of {tool.tool} within {self.call_timeout:g} s") from None
        except MCPError as exc:
            if exc.code in (UNREACHABLE, mcp_types.CONNECTION_CLOSED):
                raise _error(tool.server, f"failed during a call of {tool.tool}: {exc.message}") from None
            return f"Error: the server refused the call of {tool.tool}: {exc.message}"
        return rendered(result)

    async def _connect(self, server: ToolServer) -> None:
        """Connect, initialize and list the server's tools, or raise ToolServerError."""
        assert self._stack is not None
        stack = AsyncExitStack()
        try:
            session = await self._session(stack, server)
            with anyio.fail_after(self.timeout):
                await session.initialize()
                listed = [tool async for tool in _listing(session)]
        except BaseException as exc:
            failure = await _left(stack, exc)
            if isinstance(failure, TimeoutError):
                raise _error(server, f"did not answer within {self.timeout:g} s") from None
            if isinstance(failure, Exception):  # whatever the client raised: the server can't be used
                raise _error(server, f"can't be reached: {_why(failure)}") from None
            raise
        self._stack.push_async_callback(stack.aclose)
        for tool in listed:
            offered = _unique(NAME.sub("_", f"{server.name}__{tool.name}")[:NAME_LIMIT], self._tools)
            self._tools[offered] = _Tool(server, tool.name, session, _schema(offered, server, tool))

    async def _session(self, stack: AsyncExitStack, server: ToolServer) -> ClientSession:
        """The server's session, its transport and session entered into `stack` (no request sent yet)."""
        from mcp import ClientSession
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        if server.transport == "sse":
            streams = sse_client(server.url, timeout=self.timeout, sse_read_timeout=max(SSE_PING, self.timeout),
                                 httpx_client_factory=_sse_client_factory)
        else:
            timeout = httpx2.Timeout(self.timeout, read=self.call_timeout)
            client = await stack.enter_async_context(httpx2.AsyncClient(timeout=timeout, transport=_Guarded()))
            streams = streamable_http_client(server.url, http_client=client)
        read, write = await stack.enter_async_context(streams)
        return await stack.enter_async_context(ClientSession(read, write))


async def _listing(session: ClientSession) -> AsyncIterator[mcp_types.Tool]:
    from mcp import types as mcp_types

    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            yield tool
        cursor = page.next_cursor
        if not cursor:
            return


async def _left(stack: AsyncExitStack, failure: BaseException) -> BaseException:
    """Leave what was entered for a server that failed with `failure`; the error that stands. A
    task of the client's that failed cancels the one holding it (`failure`: a cancellation), and
    its error comes out of leaving: that error is the cause."""
    try:
        await stack.aclose()
    except Exception as exc:  # noqa: BLE001 — one failure is reported: the cause
        return failure if isinstance(failure, Exception) else exc
    return failure


def _unique(name: str, taken: dict[str, _Tool]) -> str:
    number, unique = 1, name
    while unique in taken:
        number += 1
        suffix = f"_{number}"
        unique = name[:NAME_LIMIT - len(suffix)] + suffix
    return unique


def _schema(offered: str, server: ToolServer, tool: mcp_types.Tool) -> dict[str, Any]:
    described = (tool.description or tool.title or f"The tool {tool.name}").strip()
    description = f"{described} (tool {tool.name} of the task's MCP server {server.name})"[:DESCRIPTION_LIMIT]
    parameters = {"type": "object", "properties": {}, **tool.input_schema}
    return {"type": "function", "function": {"name": offered, "description": description, "parameters": parameters}}


def rendered(result: mcp_types.CallToolResult) -> str:
    """A tool's result as text: its text parts joined, other parts described; an error says so."""
    parts = [_part(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts)
    if len(text) > RESULT_LIMIT:
        text = f"{text[:RESULT_LIMIT]}\n[result truncated: {len(text) - RESULT_LIMIT} characters omitted]"
    if result.is_error:
        return f"Error: the tool reported a failure: {text or '(no message)'}"
    return text


def _part(block: mcp_types.ContentBlock) -> str:
    from mcp import types as mcp_types

    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}" + (f" ({block.name})" if block.name else "") + "]"
    resource = block.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    size = len(resource.blob) * 3 // 4
    return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {size} bytes, not shown]"


def _error(server: ToolServer, what: str) -> ToolServerError:
    return ToolServerError(f"the task's MCP server {server.name!r} at {server.url} {what}")


def _why(exc: BaseException) -> str:
    """The first error in `exc` (through exception groups), in one line."""
    from mcp import MCPError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.message.splitlines()[0] if exc.message else f"error {exc.code}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class _Guarded(httpx2.AsyncBaseTransport):
    """HTTP for the mcp client, whose network failures are answers: a JSON-RPC error (HTTP 502)
    that the client resolves the request with, never an exception in its task group. Ending the
    session (a DELETE, as the episode leaves, maybe cancelled) waits LEAVE_TIMEOUT at most."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "DELETE":
            request.extensions = {**request.extensions, "timeout": httpx2.Timeout(LEAVE_TIMEOUT).as_dict()}
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            error = {"code": UNREACHABLE, "message": _why(exc)}
            return httpx2.Response(502, json={"jsonrpc": "2.0", "id": None, "error": error}, request=request)
        return httpx2.Response(response.status_code, headers=response.headers, stream=_GuardedStream(response.stream),
                               extensions=response.extensions, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _GuardedStream(httpx2.AsyncByteStream):
    """A response's body whose network failure is a StreamError, which the client reads as a
    broken response (the request's error), not as a failure of its own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        try:
            async for chunk in self._inner:
                read += len(chunk)
                if read > RESPONSE_LIMIT:  # a server is a task's code: it does not fill this process
                    raise httpx2.StreamError(f"the server sent more than {RESPONSE_LIMIT >> 20} MB in one response")
                yield chunk
        except httpx2.TransportError as exc:
            raise httpx2.StreamError(_why(exc)) from exc

    async def aclose(self) -> None:
        await self._inner.aclose()


def _sse_client_factory(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                        auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """The SSE transport's HTTP client (mcp's McpHttpClientFactory), on the guarded transport."""
    return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=_Guarded())
