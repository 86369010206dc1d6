"""Anthropic's Messages API on the wire (POST /v1/messages): the system prompt, the turns with their
text, `tool_use` and `tool_result` blocks, and the tools, read into OpenAI's message form (ours); the
answer as a `message`, or as its stream of events; and the error body with its one status map.

The error body is Anthropic's documented shape, `{"type": "error", "error": {"type", "message"}}`,
its `type` following the status (ERRORS, from Anthropic's list of HTTP errors)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any, Final

from agents.own import Answer
from agents.wire.calls import Call, Usage, WireError

# Anthropic's error `type` by HTTP status; any other status is an api_error. 402 is a spent budget
# (Anthropic's billing_error), 413 a body past the size cap, 529 Anthropic short of capacity.
ERRORS: Final = MappingProxyType({
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"})


def read(body: Any) -> Call:
    """The call a request body asks for; WireError for a body that is no Messages request."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise WireError(400, "messages: the body must be a JSON object with a non-empty `messages` list")
    messages: list[dict[str, Any]] = []
    system = _text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body["messages"]:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise WireError(400, "messages: each message must have the role user or assistant")
        messages += _user(message["content"]) if message["role"] == "user" else [_assistant(message["content"])]
    tools = [_tool(t) for t in body.get("tools") or []] or None
    return Call(messages, tools, bool(body.get("stream")))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _user(content: Any) -> list[dict[str, Any]]:
    """A user turn: its tool results first (as `tool` messages), then its text."""
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    found: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            found.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                          "content": _text(block.get("content"))})
    text = _text(blocks)
    if text or not found:
        found.append({"role": "user", "content": text})
    return found


def _assistant(content: Any) -> dict[str, Any]:
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    message: dict[str, Any] = {"role": "assistant", "content": _text(blocks)}
    calls = [{"id": str(b.get("id", "")), "type": "function",
              "function": {"name": str(b.get("name", "")), "arguments": json.dumps(b.get("input") or {})}}
             for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    return message


SERVER_TOOLS = ("web_search", "web_fetch", "code_execution", "computer", "mcp")  # Anthropic runs these itself


def _tool(tool: Any) -> dict[str, Any]:
    """A client tool, as a function of its name and input schema; a server tool (web search, code
    execution, ...), which the provider would run outside the container, is refused."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise WireError(400, "tools: each tool must be an object with a `name`")
    kind = str(tool.get("type") or "custom")
    if kind.startswith(SERVER_TOOLS):
        raise WireError(400, f"tools: {kind!r} is a tool the provider runs, outside the container: only client "
                             "tools are served here")
    parameters = tool.get("input_schema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": tool["name"], "description": str(tool.get("description", "")),
                                             "parameters": parameters}}


def message(answer: Answer, model: str, usage: Usage, *, message_id: str | None = None) -> dict[str, Any]:
    """The answer as a `message`; `message_id` for a server whose ids are deterministic (the
    scripted one's), else a fresh one."""
    return {"id": message_id or _id(), "type": "message", "role": "assistant", "model": model,
            "content": _blocks(answer), "stop_reason": _stop(answer), "stop_sequence": None,
            "usage": {"input_tokens": usage.prompt, "output_tokens": usage.completion}}


def events(answer: Answer, model: str, usage: Usage) -> Iterator[bytes]:
    """The answer as the Messages API streams it: the message, each block's start, delta and stop,
    then the stop reason with the usage."""
    start = {**message(Answer(""), model, Usage(usage.prompt, 0)), "content": [], "stop_reason": None}
    yield _event("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(_blocks(answer)):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield _event("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened})
        yield _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": _stop(answer), "stop_sequence": None},
                                   "usage": {"output_tokens": usage.completion}})
    yield _event("message_stop", {"type": "message_stop"})


def error(status: int, text: str) -> dict[str, Any]:
    """The error body of a request answered with `status`."""
    return {"type": "error", "error": {"type": ERRORS.get(status, "api_error"), "message": text}}


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": answer.text}] if answer.text else []
    blocks += [{"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call.arguments)}
               for call in answer.tool_calls]
    return blocks or [{"type": "text", "text": ""}]


def _tool_input(arguments: str) -> dict[str, Any]:
    """A tool_use block's `input`: the arguments' JSON object (none: `{}`); arguments that are no
    JSON object stay as the model wrote them, under `_raw`, where the agent can see them (as the
    store's Inspect transcripts keep them)."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def _stop(answer: Answer) -> str:
    return "tool_use" if answer.tool_calls else "end_turn"


def _id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
