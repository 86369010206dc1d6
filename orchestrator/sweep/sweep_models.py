"""The models of a sweep: one LLMClient for all, offline servers for `local` models, and a model
per episode (which records its calls into the episode's context: agents/recording.py).

The local server answers over real HTTP through litellm. It knows a seeded share of the tasks
and answers those with the gold action, written the way the episode's strategy reads actions; the
request's standard `user` field carries the task id and that form (`local_key`), which is how it
tells them apart.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import SecretStr

from agents.base import AnswerStyle, Model
from agents.llm import Budget, LLMClient, ModelError, ModelSpec
from agents.llm.server import ScriptedLLMServer, ScriptedToolCall, ServerConfig
from agents.llm.transport import transport
from agents.models import LLMModel, OracleModel, answer_as, check_llm, tool_call_as
from environments.kind import gold_actions
from foundation.concurrency import TaskOwner
from foundation.errors import ConfigError
from orchestrator.fidelity.replay_model import ReplayModel
from orchestrator.sweep.config import LocalServer, ModelConfig, SweepConfig
from tasks import Task

LOCAL_KEY = "sk-local-offline"
LOCAL_BASE = "http://127.0.0.1/v1"  # where a local model will be served: only checked, never called
log = structlog.get_logger(__name__)


def check_models(config: SweepConfig, data_dir: Path | None) -> None:
    """Refuse an unknown model, a missing key or an unreadable replay file with one ConfigError,
    before anything is started or stored (so a refused sweep claims no output directory)."""
    specs = [ModelSpec(name=m.name, api_base=LOCAL_BASE if m.local else m.api_base,
                       api_key=SecretStr(LOCAL_KEY) if m.local else _api_key(m))
             for m in config.models if not _offline(m.name)]
    client = LLMClient(specs)
    for spec in specs:
        check_llm(spec.name, client)
    for model in config.models:
        if _offline(model.name):
            resolve_model(model.name, client=client, data_dir=data_dir)


def local_route(name: str) -> Callable[[Task, AnswerStyle | Literal["tools"], int], dict[str, Any]]:
    """How the offline server knows which task a call of model `name` answers: litellm drops a
    plain `user` on its OpenAI path (so it goes in the body as is) and sends it as
    `metadata.user_id` to Anthropic."""
    def route(task: Task, style: AnswerStyle | Literal["tools"], turn: int) -> dict[str, Any]:
        key = local_tools_key(task, turn) if style == "tools" else local_key(task, style, turn)
        return {"user": key} if name.startswith("anthropic/") else {"extra_body": {"user": key}}
    return route


class SweepModels:
    def __init__(self, config: SweepConfig, client: LLMClient, offline: dict[str, Model],
                 spent_before: tuple[float, int] = (0.0, 0)) -> None:
        self.config = config
        self.spent_before = spent_before
        self.client = client
        self._offline = offline
        self._configs = {m.name: m for m in config.models}

    @classmethod
    @asynccontextmanager
    async def open(cls, config: SweepConfig, tasks: list[Task], data_dir: Path | None,
                   spent: tuple[float, int] = (0.0, 0)) -> AsyncIterator[SweepModels]:
        """Check every model (unknown names, missing keys), start the offline servers, and start the
        processes that make the LLM calls (`llm_workers`; none when every model is offline). Calls
        made before those are up wait for them: this process never imports litellm. `spent`: what
        the sweep's earlier runs spent (dollars, tokens), counted against its budget."""
        async with AsyncExitStack() as stack:
            specs = []
            for model in config.models:
                if _offline(model.name):
                    continue
                api_base, key = model.api_base, _api_key(model)
                if model.local is not None:
                    local = ScriptedLLMServer(_server_config(model.local, tasks, config.max_turns), keep_requests=False)
                    server = await stack.enter_async_context(local)
                    api_base, key = local_base(model.name, server.base_url), SecretStr(LOCAL_KEY)
                specs.append(ModelSpec(name=model.name, api_base=api_base, api_key=key, limits=model.limits,
                                       timeout=model.timeout))
            # Always a Budget, so that every run's spend is counted (without limits it never runs out).
            budget = Budget(max_usd=config.budget.usd, max_tokens=config.budget.tokens, spent_usd=spent[0],
                            spent_tokens=spent[1])
            client = LLMClient(specs, budget=budget, transport=transport(config.llm_workers if specs else 0))
            for spec in specs:
                check_llm(spec.name, client)
            offline = {m.name: resolve_model(m.name, client=client, data_dir=data_dir)
                       for m in config.models if _offline(m.name)}
            stack.push_async_callback(client.aclose)
            starting = await stack.enter_async_context(TaskOwner("llm-workers-start"))  # stopped at the end
            starting.spawn(_start(client), name="start")
            yield cls(config, client, offline, spent)

    def spent_this_run(self) -> tuple[float, int]:
        """Dollars and tokens this run's model calls cost so far (its budget counts the earlier runs' too)."""
        budget = self.client.budget
        assert budget is not None
        return budget.spent_usd - self.spent_before[0], budget.spent_tokens - self.spent_before[1]

    def for_episode(self, name: str) -> Model:
        """The episode's model (its calls are recorded into the episode's context: agents/recording.py)."""
        if name in self._offline:
            return self._offline[name]
        config = self._configs[name]
        route = local_route(name) if config.local is not None else None
        return LLMModel(self.client, name, route=route, **config.params)


async def _start(client: LLMClient) -> None:
    try:
        await client.start()
    except ModelError as exc:  # each call waits for a worker started again, or fails as a retryable connection error
        log.warning("llm_workers_unavailable", error=str(exc))



def _offline(name: str) -> bool:
    return name == "oracle" or name.startswith("replay:")


def _api_key(model: ModelConfig) -> SecretStr | None:
    if model.api_key_env is None:
        return None
    value = os.environ.get(model.api_key_env)
    if not value:
        raise ConfigError(f"model {model.name!r}: environment variable {model.api_key_env} (api_key_env) is not set")
    return SecretStr(value)


def local_key(task: Task, style: AnswerStyle, turn: int) -> str:
    """What the offline server's answer is keyed by: the task, the form, and for ReAct and terminus
    the turn (they act first and submit after)."""
    if style == "fenced":
        return task.id
    return f"{task.id}|{style}" + (f"|{turn}" if style in ("react", "terminus") else "")


def local_tools_key(task: Task, turn: int) -> str:
    """The offline server's key for an answer with tool calls (the tools strategy's)."""
    return f"{task.id}|tools|{turn}"


def local_base(name: str, server_url: str) -> str:
    """The local server as litellm's provider reaches it: openai/* under /v1, anthropic/* at its root
    (litellm appends /v1/messages)."""
    return server_url if name.startswith("anthropic/") else f"{server_url}/v1"


def _tool_calls(task: Task, actions: list[str], turn: int) -> list[ScriptedToolCall]:
    """The oracle's answer with tools: every gold action at the first turn, the last one after."""
    calls = [tool_call_as(task, action, "") for action in (actions if turn == 0 else actions[-1:])]
    return [ScriptedToolCall(name=call.name, arguments=call.arguments) for call in calls]


def _server_config(local: LocalServer, tasks: list[Task], max_turns: int) -> ServerConfig:
    answers: dict[str, str] = {}
    tool_answers: dict[str, list[ScriptedToolCall]] = {}
    for task in tasks:
        if _knows(local, task):
            actions = gold_actions(task)
            for turn in range(max_turns):
                tool_answers[local_tools_key(task, turn)] = _tool_calls(task, actions, turn)
            answers[local_key(task, "fenced", 0)] = answer_as(task, actions[0], "fenced")
            answers[local_key(task, "paper", 0)] = answer_as(task, actions[0], "paper")
            answers[local_key(task, "plan", 0)] = answer_as(task, actions[0], "plan")
            for turn in range(max_turns):
                for style in ("react", "terminus"):
                    answers[local_key(task, style, turn)] = answer_as(task, actions[min(turn, len(actions) - 1)],
                                                                      style, turn)
    return ServerConfig(latency=local.latency, rpm=local.rpm, answers=answers, tool_answers=tool_answers,
                        default_answer=local.default_answer)


def _knows(local: LocalServer, task: Task) -> bool:
    """A stable, seeded coin per task: the same tasks are known in every run."""
    digest = hashlib.sha256(f"{local.seed}:{task.id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < local.solve_rate


def resolve_model(name: str, *, client: LLMClient, data_dir: Path | None = None) -> Model:
    """Which model a name means, for every command that runs one: "oracle", "replay:PATH" (the
    actions of a trajectory file, fidelity/replay_model.py), or a litellm model name (checked here,
    before any container starts). The model called `name`: "oracle", "replay:PATH", or a litellm model name (checked here)."""
    if name == "oracle":
        return OracleModel()
    if name.startswith("replay:"):
        path = name.removeprefix("replay:")
        if not path:
            raise ConfigError("replay needs a trajectory file: --model replay:PATH")
        return ReplayModel(Path(path), data_dir)
    check_llm(name, client)
    return LLMModel(client, name)
