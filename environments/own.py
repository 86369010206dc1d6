"""Environments of your own (tasks/own.py reads their directory): each becomes a kind of its own,
named after its manifest, so prompts, strategies, the oracle, validate and the store treat it as
they treat Bash or SQL.

    kind = own_kind(read_environment(Path("my-env")))    # registered; kind.name == the manifest's name
    async with make_environment(kind.name, runtime) as env: ...

The action language picks how actions run: `shell` in one persistent shell of the task's container
(environments/workspace.py), `python` in one persistent interpreter there, `sql` on the shared
database server loaded from the environment's dump. Scoring calls the user's reward function:

    def reward(sandbox, task, answer) -> float | tuple[float, dict] | dict   (or `async def`)

`sandbox` reaches the episode's container (`run`, `read_text`, `python`) or database (`query`);
`task` is the task's record; `answer` is what followed `submit`, else the last action's output. A
function that raises, or returns anything but a number in [0, 1], is a RewardError: that episode
is a task error, never the model's 0, and the sweep goes on.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import math
import sys
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from environments.base import Environment, RewardError
from environments.kind import KindSpec, register
from environments.sql import SqlEnv
from environments.workspace import LeasedEnv, WorkspaceEnv, json_safe
from foundation.errors import ConfigError, SandboxError
from tasks.own import OwnEnvironment

if TYPE_CHECKING:
    from environments.sql_server import SqlServer
    from foundation.pool import Sandbox
    from tasks import Task

T = TypeVar("T")
REWARD_TIMEOUT = 120.0  # seconds a reward function may take (its commands have their own limits)
Reward = Callable[..., Any]


@dataclass(frozen=True)
class Output:
    """What a command or code run by a reward function gave."""

    output: str
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class RewardSandbox:
    """The episode's container or database, as a reward function reaches it (async methods)."""

    def __init__(self, sandbox: Sandbox | None = None, server: SqlServer | None = None, db: str | None = None,
                 workdir: str = "/") -> None:
        self._sandbox, self._server, self._db, self.workdir = sandbox, server, db, workdir

    async def run(self, command: str, timeout: float = 30.0) -> Output:
        """Run a shell command in a fresh shell in the working directory (the agent's shell is not touched)."""
        result = await self._container().exec(["sh", "-c", command], cwd=self.workdir, timeout=timeout)
        return Output(result.output, -1 if result.timed_out else result.exit_code)

    async def read_text(self, path: str) -> str | None:
        """The text of a file in the container; None when it can't be read."""
        result = await self._container().exec(["cat", path], cwd="/", timeout=30.0)
        return result.output if result.exit_code == 0 else None

    async def python(self, code: str, timeout: float = 30.0) -> Output:
        """Run Python code in the agent's interpreter (python environments: it sees the agent's names)."""
        run = await self._container().python([code], timeout=timeout)
        result = run.results[0]
        return Output("\n".join(part for part in (result.output, result.error) if part), 1 if result.raised else 0)

    async def query(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a query in the task's database, on a connection no agent used (sql environments)."""
        if self._server is None or self._db is None:
            raise RewardError("sandbox.query needs a sql environment")
        outcome = await self._server.read(self._db, sql)
        if outcome.error is not None:
            raise RewardError(f"the reward's query failed: {outcome.error}")
        return list(outcome.rows or [])

    def _container(self) -> Sandbox:
        if self._sandbox is None:
            raise RewardError("this environment has no container (a sql environment: use sandbox.query)")
        return self._sandbox


class BlockingSandbox:
    """The same methods for a plain `def reward(...)`, which runs in a worker thread: each call
    waits for the event loop to do it."""

    def __init__(self, inner: RewardSandbox, loop: asyncio.AbstractEventLoop) -> None:
        self._inner, self._loop = inner, loop
        self.workdir = inner.workdir

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(REWARD_TIMEOUT)

    def run(self, command: str, timeout: float = 30.0) -> Output:
        return self._wait(self._inner.run(command, timeout))

    def read_text(self, path: str) -> str | None:
        return self._wait(self._inner.read_text(path))

    def python(self, code: str, timeout: float = 30.0) -> Output:
        return self._wait(self._inner.python(code, timeout))

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self._wait(self._inner.query(sql))


class OwnScoring:
    """What every language's environment shares: the user's reward function, and its result as
    the episode's reward with its breakdown."""

    definition: OwnEnvironment  # set on each kind's class by own_kind
    reward_function: Reward

    task: Task | None
    history: list[tuple[str, str]]
    score_info: dict[str, Any]

    def reward_sandbox(self) -> RewardSandbox:
        raise NotImplementedError

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.task is not None
        task, name = self.task, self.definition.reward_function
        record = {"query": task.query, "gold": task.gold, **task.meta}
        outputs = [observation for action, observation in self.history if action.split(maxsplit=1)[:1] != ["submit"]]
        answer = argument or (outputs[-1] if outputs else "")
        sandbox = self.reward_sandbox()
        try:
            async with asyncio.timeout(REWARD_TIMEOUT):
                if inspect.iscoroutinefunction(self.reward_function):
                    value = await self.reward_function(sandbox, record, answer)
                else:
                    blocking = BlockingSandbox(sandbox, asyncio.get_running_loop())
                    value = await asyncio.to_thread(self.reward_function, blocking, record, answer)
        except (RewardError, SandboxError, asyncio.CancelledError):
            raise
        except TimeoutError:
            raise RewardError(f"{self._where()} took longer than {REWARD_TIMEOUT:g} s") from None
        except Exception as exc:  # noqa: BLE001 — the user's code: any error is that episode's task error
            raise RewardError(f"{self._where(exc)} raised {type(exc).__name__}: {exc}") from exc
        reward, breakdown = self._checked(value)
        return reward, {"breakdown": breakdown, "answer": answer[:500]}

    def _checked(self, value: Any) -> tuple[float, dict[str, Any]]:
        breakdown: dict[str, Any] = {}
        if isinstance(value, dict):
            breakdown, value = dict(value), value.get("reward")
        elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict):
            value, breakdown = value
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or not 0 <= value <= 1:
            raise RewardError(f"{self._where()} returned {value!r:.80}, not a number in [0, 1]")
        return float(value), {str(k): json_safe(v) for k, v in breakdown.items()}

    def breakdown(self) -> dict[str, Any] | None:
        found = self.score_info.get("breakdown")
        return found if isinstance(found, dict) else None

    def _where(self, exc: BaseException | None = None) -> str:
        """`reward.py:reward of jq`; with the exception it raised, the line it raised at, in the
        reward file (`reward.py:12 in reward of jq`), else where it left the user's code last."""
        own = self.definition
        frames = traceback.extract_tb(exc.__traceback__) if exc is not None else []
        mine = [f for f in frames if Path(f.filename).resolve() == own.reward_file.resolve()] or frames[-1:]
        if not mine:
            return f"{own.reward_file.name}:{own.reward_function} of {own.name}"
        frame = mine[-1]
        return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name} of {own.name}"


class OwnShellEnv(OwnScoring, WorkspaceEnv):
    """Shell commands in one persistent shell of the task's container."""

    def start_dir(self, task: Task, image_workdir: str) -> str:
        return self.definition.manifest.workdir or image_workdir

    def reward_sandbox(self) -> RewardSandbox:
        return RewardSandbox(self.sandbox, workdir=self._cwd)


class OwnPythonEnv(OwnScoring, LeasedEnv):
    """Python code in one persistent interpreter of the task's container; the observation is
    what it printed, then its error."""

    async def _execute(self, action: str) -> tuple[str, bool]:
        assert self.sandbox is not None
        timeout = self.definition.manifest.action_timeout
        result = (await self.sandbox.python([action], timeout=timeout)).results[0]
        note = f"[the code ran longer than {timeout:g} s and was stopped; the interpreter was restarted]"
        parts = [result.output, result.error, note if result.timed_out else ""]
        return "\n".join(part for part in parts if part), not result.raised

    def reward_sandbox(self) -> RewardSandbox:
        return RewardSandbox(self.sandbox)


class OwnSqlEnv(OwnScoring, SqlEnv):
    """SQL queries on the environment's database (its dump, loaded at build), in the task's `db`."""

    def reward_sandbox(self) -> RewardSandbox:
        assert self.task is not None
        return RewardSandbox(server=self._server, db=str(self.task.meta["db"]))


BASES: dict[str, type[Environment]] = {"shell": OwnShellEnv, "python": OwnPythonEnv, "sql": OwnSqlEnv}
LANGUAGES = {"shell": ("BASH", "bash", frozenset({"bash", "sh", "shell", "console"})),
             "python": ("PYTHON", "python", frozenset({"python", "py", "python3"})),
             "sql": ("SQL", "sql", frozenset({"sql", "mysql"}))}
DESCRIPTIONS = {"shell": "Run a shell command (the shell's state carries over between calls) and return what it printed.",
                "python": "Run Python code in a persistent interpreter and return what it printed.",
                "sql": "Run a SQL query on the database and return its result."}


def own_kind(own: OwnEnvironment) -> KindSpec:
    """Register `own` as a kind named after it (the latest registration of a name wins: a sweep
    refuses two directories of one name); ConfigError when its reward function won't load. Its
    environment is a class made for it (a subclass of the language's), whose `spec` it becomes.
    The manifest's `max_turns` and `episode_timeout` are each task's own (tasks/own.py)."""
    manifest = own.manifest
    base = BASES[manifest.language]
    action_timeout = manifest.action_timeout
    environment = type(f"Own_{own.name}", (base,), {
        "kind": own.name, "definition": own, "reward_function": staticmethod(load_reward(own)),
        "scores_every_action": manifest.score_every_action, "action_timeout": action_timeout})
    language, fence, tags = LANGUAGES[manifest.language]
    return register(KindSpec(
        name=own.name, environment=environment, language=language, setting=own.setting, fence=fence, fence_tags=tags,
        export_name=f"ic_{own.name}", datasets=(own.name,), gold_actions=_gold_then_submit, paper_parser="code_or_whole",
        tool=manifest.language, tool_argument="code" if manifest.language == "python" else (
            "query" if manifest.language == "sql" else "command"),
        tool_description=DESCRIPTIONS[manifest.language], shows_reward=manifest.score_every_action,
        submit_at_end=not manifest.score_every_action, prompts="" if manifest.score_every_action else "task",
        directory=str(own.root)))


def load_reward(own: OwnEnvironment) -> Reward:
    """The reward function, imported from its file as a module of its own; ConfigError naming the
    file when it doesn't import or has no such function."""
    module_name = f"intercode_reward_{own.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(module_name, own.reward_file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{own.reward_file} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 — the user's module: any error is theirs to fix
        raise ConfigError(f"{own.reward_file} does not import: {type(exc).__name__}: {exc}") from None
    function: Callable[..., Any] | None = getattr(module, own.reward_function, None)
    if not callable(function):
        raise ConfigError(f"{own.reward_file} has no function {own.reward_function!r} (the reward: "
                          "def reward(sandbox, task, answer))")
    return function


def _gold_then_submit(task: Task) -> list[str]:
    """The oracle's turns: the record's gold (one action, or a list of them), then `submit`."""
    gold = [task.gold] if isinstance(task.gold, str) else list(task.gold)
    return [*(action for action in gold if action), "submit"]
