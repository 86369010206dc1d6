"""OpenAI's Responses API through the gateway (what Codex CLI speaks, issue 46), with OpenAI's own
SDK as the client: a stateless request's history read into messages (instructions, function calls
and their outputs, a freeform tool's call), hosted tools never offered to the model, the answer
as a `response` and as its server-sent events, a freeform tool answered as `custom_tool_call`."""

from __future__ import annotations

import json
from typing import Any


from agents.base import ToolCall
from agents.gateway import LLMGateway
from agents.models import OracleModel
from agents.own import Answer
from agents.strategies.external import ModelHandle
from tasks import load_tasks
from tests.lazy import lazy

openai = lazy("openai")

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
HISTORY = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": None},
    {"type": "function_call", "call_id": "call_1", "name": "shell_command", "arguments": json.dumps({"command": "ls"})},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt\n"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": PATCH},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "Done!"}]},
]
TOOLS: list[Any] = [
    {"type": "function", "name": "shell_command", "description": "Runs a command.", "strict": False,
     "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"type": "custom", "name": "apply_patch", "description": "Edits files.",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "web_search"},
]


def patching(answer: Answer, tools: Any) -> Answer:
    """The model's answer: a patch, through the freeform tool."""
    return Answer("Patching.", (ToolCall("call_9", "apply_patch", json.dumps({"input": PATCH})),))


async def test_a_codex_request_is_read_whole_and_answered_in_both_forms():
    task = load_tasks("starter-bash")[0]
    async with LLMGateway.serve() as gateway:
        handle = ModelHandle(OracleModel(), task, rewrite=patching)
        door = gateway.open(handle)
        client = openai.AsyncOpenAI(base_url=door.access.openai_base_url, api_key=door.access.api_key, max_retries=0)
        async with client:
            await codex_turns(client)
    check_history(handle)


async def codex_turns(client: openai.AsyncOpenAI) -> None:
    plain = await client.responses.create(model="gpt-5.5", instructions="You are Codex.", input=HISTORY,
                                          tools=TOOLS, store=False)
    assert plain.status == "completed" and plain.usage is not None
    [message, patch] = plain.output
    assert message.type == "message" and message.content[0].text == "Patching."
    assert patch.type == "custom_tool_call" and (patch.name, patch.input, patch.call_id) == ("apply_patch", PATCH, "call_9")

    streamed = []
    async with await client.responses.create(model="gpt-5.5", input=HISTORY, tools=TOOLS, stream=True) as stream:
        async for event in stream:
            streamed.append(event)
    kinds = [e.type for e in streamed]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert kinds.count("response.output_item.done") == 2 and "response.output_text.delta" in kinds
    done = streamed[-1].response
    assert [item.type for item in done.output] == ["message", "custom_tool_call"] and done.output[1].input == PATCH
    assert done.usage is not None and done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens


def check_history(handle: ModelHandle) -> None:
    messages, _ = handle.log[0]
    assert messages[0] == {"role": "system", "content": "You are Codex."}
    assert messages[1] == {"role": "system", "content": "Be brief."} and messages[2]["content"] == "List the files."
    calls = messages[3]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["shell_command"]
    assert messages[4] == {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt\n"}
    assert json.loads(messages[5]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    assert messages[6] == {"role": "tool", "tool_call_id": "call_2", "content": "Done!"}
    assert len(messages) == 7  # the reasoning item is no message


async def test_hosted_tools_are_never_offered_and_a_stored_conversation_is_refused():
    task = load_tasks("starter-bash")[0]
    offered: list[Any] = []

    def seen(answer: Answer, tools: Any) -> Answer:
        offered.append(tools)
        return answer

    async with LLMGateway.serve() as gateway:
        door = gateway.open(ModelHandle(OracleModel(), task, rewrite=seen))
        async with openai.AsyncOpenAI(base_url=door.access.openai_base_url, api_key=door.access.api_key,
                                      max_retries=0) as client:
            await refusals(client, offered)


async def refusals(client: openai.AsyncOpenAI, offered: list[Any]) -> None:
    await client.responses.create(model="m", input="hi", tools=TOOLS)
    assert [t["function"]["name"] for t in offered[0]] == ["shell_command", "apply_patch"]
    assert offered[0][1]["function"]["parameters"]["required"] == ["input"]
    try:
        await client.responses.create(model="m", input="hi", previous_response_id="resp_1")
    except openai.BadRequestError as error:
        assert "previous_response_id" in str(error)
    else:
        raise AssertionError("a stored conversation was answered")
    try:
        await client.responses.create(model="m", input=[{"type": "message", "role": "robot", "content": "x"}])
    except openai.BadRequestError as error:
        assert "role must be one of" in str(error)
    else:
        raise AssertionError("an unknown role was answered")
