"""litellm's own HTTP handler (our default for openai/*) against the openai SDK path it replaces.

`agents.llm._litellm` switches OpenAI-compatible calls to litellm's handler because it costs less
CPU per call. These tests hold it to giving the same thing as the SDK path, over real HTTP to the
scripted server: the same request body, the same reply and cost, and the same ModelError (kind,
reason, status, Retry-After) for every failure the client treats differently.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import pytest

from agents.llm.errors import ModelError
from agents.llm.server import ScriptedLLMServer, ServerConfig
from agents.llm.transport import InProcessTransport, Request

SWITCH = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
KEY = "sk-test-SECRET-77d1e0"
PRICED = "openai/gpt-4o-mini"
UNPRICED = "openai/scripted-no-such-model"
MESSAGES = [{"role": "system", "content": "You write bash."}, {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": "ls"}, {"role": "user", "content": "Output: a b\nTry again."}]
FAILURES: list[dict[str, Any]] = [
    {"status": 400, "message": "messages: field required"},
    {"status": 404, "message": "The model does not exist"},
    {"status": 429, "retry_after": 7, "message": "rate limit exceeded"},
    {"status": 500, "message": "upstream overloaded"},
    {"status": 503, "retry_after": 2, "message": "try later"},
    {"kind": "malformed"},
    {"auth": True},  # the key is refused with a 401 whose text echoes it
]


def test_the_handler_is_the_default() -> None:
    import agents.llm._litellm  # noqa: F401 — sets the default

    assert os.environ.get(SWITCH) == "True"


async def _outcome(server: ScriptedLLMServer, model: str, failure: dict[str, Any] | None,
                   **params: Any) -> tuple[Any, dict[str, Any] | None, str | None]:
    """What one call gave (a Reply or the ModelError's fields), the body the server saw, and its client."""
    server.config.rejected_keys = {KEY} if failure == {"auth": True} else set()
    if failure is not None and "auth" not in failure:
        server.fail_next(1, **failure)
    request = Request(model=model, messages=MESSAGES, params=params, api_base=f"{server.base_url}/v1", api_key=KEY,
                      timeout=10)
    try:
        result: Any = await InProcessTransport().call(request)
    except ModelError as error:
        result = {"kind": error.kind, "reason": error.reason, "status": error.status, "retry_after": error.retry_after}
    seen = server.requests[-1]
    return result, seen.body, seen.user_agent


def _failure_id(failure: dict[str, Any] | None) -> str:
    return "ok" if failure is None else str(failure.get("status", failure.get("kind", "auth")))


@pytest.mark.parametrize("failure", [None, *FAILURES], ids=_failure_id)
@pytest.mark.parametrize("model", [PRICED, UNPRICED])
async def test_handler_and_sdk_agree(failure: dict[str, Any] | None, model: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    outcomes = {}
    async with ScriptedLLMServer(ServerConfig(default_answer="ls -la /tmp")) as server:
        for switch in ("True", "False"):
            monkeypatch.setenv(SWITCH, switch)  # litellm reads it on every call
            outcomes[switch] = await _outcome(server, model, failure, temperature=0.0, max_tokens=64)
    (handler, handler_body, handler_agent), (sdk, sdk_body, sdk_agent) = outcomes["True"], outcomes["False"]
    assert handler_agent != sdk_agent and "openai" in (sdk_agent or "").lower()  # two different paths really ran
    assert handler_body == sdk_body
    if failure is not None and failure.get("kind") == "malformed":
        # The SDK path calls it a 500 from litellm; the handler keeps the HTTP status (200). Same kind.
        assert handler["kind"] == sdk["kind"] == "malformed" and handler["retry_after"] is sdk["retry_after"] is None
        assert handler["reason"].startswith("malformed response body") and "Original Response" not in handler["reason"]
        return
    assert _apart_from_the_id(handler) == _apart_from_the_id(sdk)
    if failure is None:
        assert handler.text == "ls -la /tmp" and handler.prompt_tokens > 0
        assert (handler.cost_usd is None) == (model == UNPRICED)
    else:
        assert isinstance(handler, dict) and KEY not in handler["reason"]


def _apart_from_the_id(outcome: Any) -> Any:
    """A reply with its response id left out of `raw` (the scripted server numbers its answers, so
    the second path's id is the next number); the id is there on both paths."""
    if isinstance(outcome, dict) or not outcome.raw:
        return outcome
    raw = json.loads(outcome.raw)
    assert str(raw.pop("id", "")).startswith("chatcmpl-scripted-"), outcome.raw
    return replace(outcome, raw=json.dumps(raw, sort_keys=True))
