"""OpenAI's chat completions on the wire (POST /v1/chat/completions), as the gateway reads and
answers them: the request's messages and tools (OpenAI's form is ours), the answer as a
`chat.completion`, or as `chat.completion.chunk` server-sent events when the request streams."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from agents.gateway.calls import Call, Usage, WireError
from agents.own import Answer


def read(body: Any) -> Call:
    """The call a request body asks for; WireError for a body that is no chat completion."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        raise WireError(400, "the body must be a JSON object with a non-empty `messages` list")
    messages = [_message(m) for m in body["messages"]]
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise WireError(400, "`tools` must be a list of function objects")
    tools = [_tool(t) for t in tools] if tools else None
    options = body.get("stream_options") or {}
    return Call(messages, tools, bool(body.get("stream")), bool(isinstance(options, dict) and options.get("include_usage")))


def _tool(tool: Any) -> dict[str, Any]:
    """A function tool, as the agent declared it, and nothing else of it: a provider's hosted tools
    (`web_search_preview`, `code_interpreter`, `mcp`, ...) would run outside the container, its
    network and the budget, so they are refused."""
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise WireError(400, f"tools: only function tools are served here, not {kind!r} (a provider's hosted tools "
                             "would reach outside the container)")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise WireError(400, "tools: each function tool needs a `function` with a `name`")
    kept = {key: function[key] for key in ("name", "description", "parameters", "strict") if key in function}
    return {"type": "function", "function": kept}


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise WireError(400, "each message must be an object with a `role`")
    found = dict(message)
    content = found.get("content")
    if isinstance(content, list):  # parts: the text ones, joined (what a text model reads)
        found["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    elif content is None and not found.get("tool_calls"):
        found["content"] = ""
    return found


def completion(answer: Answer, model: str, usage: Usage) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or (None if answer.tool_calls else "")}
    if answer.tool_calls:
        message["tool_calls"] = [_call(call) for call in answer.tool_calls]
    return {"id": _id(), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(answer)}],
            "usage": _usage(usage)}


def chunks(answer: Answer, model: str, usage: Usage, with_usage: bool) -> Iterator[bytes]:
    """The answer as server-sent events: the role, the text, each call, the end (and the usage)."""
    head = {"id": _id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**head, "choices": [choice]})

    yield event({"role": "assistant", "content": ""})
    if answer.text:
        yield event({"content": answer.text})
    for index, call in enumerate(answer.tool_calls):
        yield event({"tool_calls": [{"index": index, **_call(call)}]})
    yield event({}, _finish(answer))
    if with_usage:
        yield _sse({**head, "choices": [], "usage": _usage(usage)})
    yield b"data: [DONE]\n\n"


def error(status: int, message: str) -> dict[str, Any]:
    kind = {401: "authentication_error", 402: "insufficient_quota", 429: "rate_limit_exceeded"}.get(status, "api_error")
    if status == 400:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _call(call: Any) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _finish(answer: Answer) -> str:
    return "tool_calls" if answer.tool_calls else "stop"


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.prompt, "completion_tokens": usage.completion, "total_tokens": usage.prompt + usage.completion}


def _id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def _sse(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()
