"""OpenAI's chat completions on the wire (POST /v1/chat/completions): the request's messages and
tools read (OpenAI's form is ours), the answer as a `chat.completion`, or as `chat.completion.chunk`
server-sent events when the request streams, and the error body with its one status map, which the
Responses API shares (agents/wire/openai_responses.py).

The error body is OpenAI's documented shape, `{"error": {"message", "type", "param", "code"}}`. The
`type` follows the status (ERRORS); `code` is a machine-readable reason when there is one
(`invalid_api_key`, `rate_limit_exceeded`), else the type: SDKs and agents read either."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any, Final

from agents.own import Answer
from agents.wire.calls import Call, Usage, WireError

# OpenAI's error `type` by HTTP status; any other status is an api_error. 402 is our spent budget,
# which OpenAI itself reports as insufficient_quota; 500 and 503 are OpenAI's server errors.
ERRORS: Final = MappingProxyType({
    400: "invalid_request_error", 401: "authentication_error", 402: "insufficient_quota", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_exceeded", 500: "server_error",
    503: "server_error"})


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


def completion(answer: Answer, model: str, usage: Usage, *, reply_id: str | None = None) -> dict[str, Any]:
    """The answer as a `chat.completion`; `reply_id` for a server whose ids are deterministic
    (the scripted one's), else a fresh one."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or (None if answer.tool_calls else "")}
    if answer.tool_calls:
        message["tool_calls"] = [_call(call) for call in answer.tool_calls]
    return {"id": reply_id or _id(), "object": "chat.completion", "created": int(time.time()), "model": model,
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


def error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """The error body of a request answered with `status`, in chat completions and Responses alike."""
    kind = ERRORS.get(status, "api_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code or kind}}


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
