"""Agents of your own: a Python file outside the project, named in a sweep beside the built-in
strategies, with a path that starts at the sweep file's directory:

    strategies = ["try_again", "my_agents.py:CoT"]

    # my_agents.py: a class with `run` (or a plain function `(episode, model)`), async or not
    from agents.own import AgentModel, Episode

    class CoT:
        async def run(self, episode: Episode, model: AgentModel) -> None:
            messages = [{"role": "user", "content": episode.query}]
            answer = await model.complete(messages)
            step = await episode.step(answer.text)             # observation, reward (if scored), done
            ...
            await episode.submit()

An agent gets what a built-in strategy gets: the episode (its query, `step`, `submit`, its limits,
the tools of its kind in OpenAI's format) and a model (`complete(messages, tools=None)`), whose
every call is the sweep's: recorded, limited, budgeted, in the transcript. An agent written against
the OpenAI or Anthropic Python SDK keeps its code: its client is pointed at the sweep's model
through `episode.gateway` (`openai_base_url`, `anthropic_base_url`, `api_key`: a token for this
episode alone, refused once it has ended). A plain `def run` runs in a worker thread, with the same
methods blocking. The adapter that runs them as a strategy is agents/strategies/external.py.

An exception of the agent's is its episode's `agent_error`, named with the file, line and function;
`OutOfTurns` (a step past `max_turns`) ends the episode as out of turns.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agents.llm.transport import ToolCall
from foundation.errors import ConfigError, OrchestratorError
from foundation.outcome import FailureClass, Status

__all__ = ["Agent", "AgentError", "AgentModel", "Answer", "Episode", "GatewayAccess", "OutOfTurns", "Step", "ToolCall",
           "is_agent_name", "load_agent"]

AGENT_NAME = re.compile(r"^(?P<path>[^:]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")  # my_agents.py:CoT


@dataclass(frozen=True)
class Step:
    """What an action gave: its output, the reward after it where the kind scores every action
    (None where only `submit` is scored: Harbor's verifier, a reward of yours at the end), and
    whether the episode has ended."""

    observation: str
    reward: float | None
    done: bool


@dataclass(frozen=True)
class Answer:
    """A model's answer: its text, and the calls it made when it was offered tools."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class GatewayAccess:
    """Where an SDK client reaches the sweep's model for this episode: OpenAI's chat completions at
    `openai_base_url`, Anthropic's Messages API at `anthropic_base_url`, with `api_key` (this
    episode's token, never a provider's key)."""

    openai_base_url: str
    anthropic_base_url: str
    api_key: str


class Episode(Protocol):
    """One episode, as an agent of yours drives it."""

    @property
    def query(self) -> str:
        """The task, as the agent is to read it."""
        ...

    @property
    def task_id(self) -> str: ...

    @property
    def kind(self) -> str:
        """The environment's kind: bash, sql, python, ctf, harbor, or yours."""
        ...

    @property
    def language(self) -> str:
        """The language of its actions: BASH, SQL, PYTHON, or your environment's."""
        ...

    @property
    def max_turns(self) -> int:
        """How many actions it may take (`step` past them raises OutOfTurns)."""
        ...

    @property
    def turns_left(self) -> int: ...

    @property
    def done(self) -> bool: ...

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The kind's action tool and `submit`, as OpenAI function schemas (what `tools` offers)."""
        ...

    @property
    def gateway(self) -> GatewayAccess | None:
        """Where an OpenAI or Anthropic SDK client reaches the model; None when none is served."""
        ...

    async def step(self, action: str) -> Step:
        """Run one action (a command, a query, code), as the kind runs it."""
        ...

    async def submit(self, answer: str = "") -> Step:
        """End the episode, scored (`answer`: what `submit` takes for the kind: a flag, a function name)."""
        ...


class AgentModel(Protocol):
    """The sweep's model for this episode: messages (OpenAI's form) and optional tools in, an answer out."""

    @property
    def name(self) -> str: ...

    async def complete(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> Answer:
        ...


class Agent(Protocol):
    """An agent of yours: `run` drives one episode (a coroutine, or a plain function run in a thread)."""

    def run(self, episode: Episode, model: AgentModel) -> Any: ...


class OutOfTurns(Exception):  # noqa: N818 — the name says what happened, as StopIteration does
    """A step past the episode's `max_turns`: the episode ends as out of turns, not as an error."""


class AgentError(OrchestratorError):
    """An agent of yours raised, or returned something else than None: that episode's failure."""

    status = Status.AGENT_ERROR
    failure_class = FailureClass.AGENT


@dataclass(frozen=True)
class LoadedAgent:
    """An agent named `path.py:Name`, imported: a class with `run` (one instance an episode, made
    with no arguments) or a function, and where it came from."""

    name: str  # as the sweep names it
    path: Path
    target: Any
    digest: str  # of the file: results are refused to a changed agent, as to a changed task

    @property
    def is_async(self) -> bool:
        run = getattr(self.target, "run", None) if inspect.isclass(self.target) else self.target
        return inspect.iscoroutinefunction(run)

    def runner(self) -> Callable[..., Any]:
        """This episode's `run(episode, model)`: a new instance's, or the function."""
        if inspect.isclass(self.target):
            instance: Any = self.target()
            run: Callable[..., Any] = instance.run
            return run
        function: Callable[..., Any] = self.target
        return function

    def where(self, error: BaseException | None = None) -> str:
        """`my_agents.py:CoT`; with the exception it raised, where in the file it raised it."""
        frames = traceback.extract_tb(error.__traceback__) if error is not None else []
        mine = [f for f in frames if Path(f.filename).resolve() == self.path] or frames[-1:]
        if not mine:
            return self.name
        return f"{Path(mine[-1].filename).name}:{mine[-1].lineno} in {mine[-1].name} of {self.name}"


def is_agent_name(name: str) -> bool:
    """Whether a strategy name names an agent of yours (`path.py:Name`)."""
    return AGENT_NAME.match(name) is not None


def load_agent(name: str, base_dir: Path) -> LoadedAgent:
    """The agent `path.py:Name` (the path from `base_dir`), imported; ConfigError in one line when
    the file is missing or does not import, or holds no such class or function."""
    found = AGENT_NAME.match(name)
    if found is None:
        raise ConfigError(f"strategy {name!r} is neither built in nor an agent of yours (`path.py:Name`)")
    path = (base_dir / found["path"]).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"agent {name!r}: {path} does not exist (paths start at the sweep file's directory)")
    module = _import(path, name)
    target = getattr(module, found["name"], None)
    if target is None:
        raise ConfigError(f"agent {name!r}: {path.name} has no {found['name']!r}")
    _check(target, name)
    return LoadedAgent(name, path, target, hashlib.sha256(path.read_bytes()).hexdigest()[:16])


def _import(path: Path, name: str) -> Any:
    module_name = f"intercode_agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"agent {name!r}: {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 — the user's file: any error is one line naming it
        del sys.modules[module_name]
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path]
        line = f":{frames[-1].lineno}" if frames else (f":{exc.lineno}" if isinstance(exc, SyntaxError) else "")
        raise ConfigError(f"agent {name!r}: {path.name}{line} does not import: {type(exc).__name__}: {exc}") from None
    return module


def _check(target: Any, name: str) -> None:
    """ConfigError unless `target` is a class with a `run` method, or a function."""
    if inspect.isclass(target):
        if not callable(getattr(target, "run", None)):
            raise ConfigError(f"agent {name!r}: {target.__name__} has no method run(episode, model)")
    elif not callable(target):
        raise ConfigError(f"agent {name!r}: {target!r} is neither a class with run(episode, model) nor a function")
