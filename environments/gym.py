"""A thin synchronous gymnasium wrapper, for users of the original InterCode API.

    import gymnasium as gym
    import environments.gym  # registers intercode-{bash,sql,python,ctf}-v0
    env = gym.make("intercode-bash-v0", dataset="nl2bash-fs1", data_dir="../shared/intercode-data")
    observation, info = env.reset(options={"index": 3})
    observation, reward, terminated, truncated, info = env.step("ls /testbed")
    env.close()

`gym.make("environments.gym:intercode-sql-v0")` works without the import. The async environment
runs on its own event loop in a background thread, so the pool's resets go on between calls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import gymnasium

from environments import make_environment
from environments.kind import BUILTIN, kind_spec
from environments.runtime import Runtime
from foundation.pool import ImagePoolConfig
from foundation.errors import ConfigError
from tasks import Task, load_tasks

if TYPE_CHECKING:
    from environments.base import Environment

T = TypeVar("T")
TEXT = gymnasium.spaces.Text(max_length=1 << 20, charset=frozenset(chr(c) for c in range(32, 127)) | {"\n", "\t"})


class IntercodeGymEnv(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, kind: str, dataset: str | None = None, data_dir: str | Path | None = None,
                 reward_mode: str = "original", *, tasks: list[Task] | None = None,
                 pools: dict[str, ImagePoolConfig] | None = None) -> None:
        """`tasks` instead of a dataset's (tasks of your own: orchestrator/task_gym.py), with `pools`,
        their images' pool settings."""
        self.kind = kind
        self.tasks: list[Task] = tasks if tasks is not None else load_tasks(
            dataset or _default_dataset(kind), Path(data_dir) if data_dir else None)
        self.pools = pools
        self.observation_space = self.action_space = TEXT
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"intercode-{kind}", daemon=True)
        self._thread.start()
        self._stack = AsyncExitStack()
        self._closed = False
        try:
            self._env = self._call(self._open(self._stack, Path(data_dir) if data_dir else None, reward_mode))
        except BaseException:
            self.close()  # what was opened before the error is closed, and the loop's thread ends
            raise

    async def _open(self, stack: AsyncExitStack, data_dir: Path | None, reward_mode: str) -> Environment:
        """The environment the episodes run in, and what it needs, entered on `stack` (closed by
        `close`). Here a runtime on this machine's engine; orchestrator/cluster/gym.py opens one
        on a host of a Ray cluster instead."""
        opened = Runtime.open(data_dir=data_dir, reward_mode=reward_mode, images=self.pools)  # type: ignore[arg-type]
        runtime = await stack.enter_async_context(opened)
        return await stack.enter_async_context(make_environment(self.kind, runtime))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        index = (options or {}).get("index")
        if index is None:
            index = int(self.np_random.integers(len(self.tasks)))
        task = self.tasks[index]
        observation = self._call(self._env.reset(task))
        return observation, {"task": task.id, "index": index}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self._call(self._env.step(action))
        return result.observation, result.reward, result.done, False, result.info

    def score(self) -> tuple[float, dict[str, Any]]:
        return self._call(self._env.score())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._stack.aclose())  # the environment, then what it needed
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()


def _default_dataset(kind: str) -> str:
    spec = kind_spec(kind)
    if spec.starter is None:
        raise ConfigError(f"kind {kind} has no starter set: name a dataset")
    return spec.starter


for _kind in (kind for kind in BUILTIN if kind_spec(kind).datasets):  # Harbor's tasks: orchestrator/task_gym.py
    gymnasium.register(id=f"intercode-{_kind}-v0", entry_point="environments.gym:IntercodeGymEnv", kwargs={"kind": _kind},
                       disable_env_checker=True)
