"""OpenAI's Responses API on the wire (POST /v1/responses), as the gateway reads and answers it: what
Codex CLI speaks (it has no chat completions any more). A request is stateless here, as Codex sends
it (`store: false`, the whole history in `input` every turn); it is read into our message form:

    instructions                   -> a system message
    message (user, developer, assistant; input_text/output_text parts) -> a message of that role
    function_call / custom_tool_call -> an assistant message's tool call
    function_call_output / custom_tool_call_output -> a tool message
    reasoning, and items of a provider's own (web_search_call, ...) -> left out

Function tools are offered as they are; a custom (freeform) tool, such as Codex's `apply_patch`, is
offered as a function of one string argument, `input`, and a call of it is answered as a
`custom_tool_call` with that input. A provider's hosted tools (`web_search`, `file_search`, ...)
would run outside the container: they are not offered to the model (the model never sees them).

The answer is a `response` object, or, when the request streams, its server-sent events:
response.created, then per output item output_item.added, its text delta, output_item.done, then
response.completed with the usage. An error is chat completions' error body, with its one status map
(agents/wire/openai_chat.py).
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from agents.own import Answer
from agents.wire.calls import Call, Usage, WireError
from agents.wire.openai_chat import error as error

CUSTOM_ARGUMENT = "input"  # the one argument a custom tool is offered with
ROLES = {"user": "user", "developer": "system", "system": "system", "assistant": "assistant"}


def read(body: Any) -> Call:
    """The call a request body asks for; WireError for a body that is no Responses request."""
    if not isinstance(body, dict):
        raise WireError(400, "the body must be a JSON object")
    if body.get("previous_response_id"):
        raise WireError(400, "`previous_response_id` is not served here: nothing is stored; send the whole "
                             "conversation in `input` (store: false)")
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise WireError(400, "the body must have `input`: a string, or a non-empty list of items")
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    for item in items:
        _item(item, messages)
    if not messages:
        raise WireError(400, "`input` holds no message")
    tools, custom = _tools(body.get("tools"))
    return Call(messages, tools or None, bool(body.get("stream")), True, frozenset(custom))


def _item(item: Any, messages: list[dict[str, Any]]) -> None:
    if not isinstance(item, dict):
        raise WireError(400, "each item of `input` must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        role = ROLES.get(str(item.get("role")))
        if role is None:
            raise WireError(400, f"a message's role must be one of {', '.join(ROLES)}, not {item.get('role')!r}")
        messages.append({"role": role, "content": _text(item.get("content"))})
    elif kind in ("function_call", "custom_tool_call"):
        if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
            raise WireError(400, f"a {kind} needs a `call_id` and a `name`")
        arguments = item.get("arguments") if kind == "function_call" else json.dumps({CUSTOM_ARGUMENT: item.get("input")})
        call = {"id": item["call_id"], "type": "function",
                "function": {"name": item["name"], "arguments": arguments if isinstance(arguments, str) else "{}"}}
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and "tool_calls" in last:
            last["tool_calls"].append(call)  # parallel calls of one answer: one assistant message
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if not isinstance(item.get("call_id"), str):
            raise WireError(400, f"a {kind} needs a `call_id`")
        messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(item.get("output"))})
    # reasoning, and a provider's own items (web_search_call, local_shell_call, compaction): not the model's input here


def _text(content: Any) -> str:
    """A message's or an output's text: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content
                       if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text"))
    return ""


def _tools(tools: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The function tools in our form, and the names of the custom ones; hosted tools left out."""
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        raise WireError(400, "`tools` must be a list")
    offered, custom = [], []
    for tool in tools:
        if not isinstance(tool, dict):
            raise WireError(400, "each tool must be an object")
        kind = tool.get("type")
        if kind not in ("function", "custom"):
            continue  # a provider's hosted tool: it would run outside the container, so it is not offered
        if not isinstance(tool.get("name"), str):
            raise WireError(400, f"a {kind} tool needs a `name`")
        function: dict[str, Any] = {"name": tool["name"], "description": str(tool.get("description") or "")}
        if kind == "function":
            function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        else:
            custom.append(tool["name"])
            function["parameters"] = {"type": "object", "required": [CUSTOM_ARGUMENT], "properties": {
                CUSTOM_ARGUMENT: {"type": "string", "description": "the tool's input, as free text"}}}
        offered.append({"type": "function", "function": function})
    return offered, custom


def response(answer: Answer, model: str, usage: Usage, call: Call) -> dict[str, Any]:
    """The answer as a `response` object (a request that does not stream)."""
    return _response(_id("resp"), model, "completed", _output(answer, call), usage)


def events(answer: Answer, model: str, usage: Usage, call: Call) -> Iterator[bytes]:
    """The answer as the server-sent events of a streamed response."""
    rid = _id("resp")
    sequence = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": next(sequence), **fields}
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

    yield event("response.created", response=_response(rid, model, "in_progress", [], None))
    output = _output(answer, call)
    for index, item in enumerate(output):
        started = {**item, "content": []} if item["type"] == "message" else item
        yield event("response.output_item.added", output_index=index, item=started)
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})
            yield event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                        delta=text)
            yield event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_response(rid, model, "completed", output, usage))


def _output(answer: Answer, call: Call) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.text or not answer.tool_calls:
        items.append({"type": "message", "id": _id("msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.text, "annotations": []}]})
    for tool_call in answer.tool_calls:
        if tool_call.name in call.custom_tools:
            try:
                given = json.loads(tool_call.arguments)
            except json.JSONDecodeError:
                given = tool_call.arguments
            text = given.get(CUSTOM_ARGUMENT, "") if isinstance(given, dict) else str(given)
            items.append({"type": "custom_tool_call", "id": _id("ctc"), "status": "completed",
                          "call_id": tool_call.id, "name": tool_call.name, "input": str(text)})
        else:
            items.append({"type": "function_call", "id": _id("fc"), "status": "completed", "call_id": tool_call.id,
                          "name": tool_call.name, "arguments": tool_call.arguments})
    return items


def _response(rid: str, model: str, status: str, output: list[dict[str, Any]], usage: Usage | None) -> dict[str, Any]:
    found: dict[str, Any] = {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
                             "model": model, "output": output, "error": None, "incomplete_details": None}
    if usage is not None:
        found["usage"] = {"input_tokens": usage.prompt, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": usage.completion, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": usage.prompt + usage.completion}
    return found


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"
