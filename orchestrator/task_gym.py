"""Tasks of your own in gymnasium: `intercode-tasks-v0`, the synchronous wrapper of environments/gym.py
over an environment of your own or Harbor task folders (their images built first where missing).

    env = gymnasium.make("orchestrator.task_gym:intercode-tasks-v0", path="my-env/")
    env = gymnasium.make("orchestrator.task_gym:intercode-tasks-v0", path="datasets/my-bench")  # Harbor folders
    observation, info = env.reset(options={"index": 0})
    observation, reward, terminated, truncated, info = env.step("ls")
    observation, reward, terminated, truncated, info = env.step("submit")   # Harbor: the tests run now
    env.close()
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import gymnasium

from environments.gym import IntercodeGymEnv
from orchestrator.images.ensure import ensure_images
from orchestrator.tasksets.resolve import of_directory

if TYPE_CHECKING:
    from environments.base import Environment


class TaskGymEnv(IntercodeGymEnv):
    def __init__(self, path: str | Path, allow_internet: bool = False, reward_mode: str = "original",
                 host_env: list[str] | None = None) -> None:
        """`path`: an environment of your own (a directory with environment.toml), a Harbor task
        folder or a folder of them; `allow_internet`: Harbor tasks whose task.toml allows it get a network;
        `host_env`: the variables of this machine their `${VAR}` templates may take (none by default)."""
        task_set = of_directory(path, allow_internet=allow_internet, host_env=host_env)
        self._images = task_set.images
        super().__init__(task_set.kind, reward_mode=reward_mode, tasks=task_set.tasks, pools=task_set.pools())

    async def _open(self, stack: AsyncExitStack, data_dir: Path | None, reward_mode: str) -> Environment:
        await ensure_images(self._images, None)
        return await super()._open(stack, data_dir, reward_mode)


gymnasium.register(id="intercode-tasks-v0", entry_point="orchestrator.task_gym:TaskGymEnv", disable_env_checker=True)
