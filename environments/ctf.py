"""The Capture-the-Flag environment: Bash in the task's asset directory, scored by the flag.

The episode starts in /ctf/<task_id> (the original's `cd /ctf/<task_id>` preprocess). `submit FLAG`
scores 1 when FLAG equals the gold flag, ignoring case. The original took only the first word after
`submit` (its `split(" ")[1]`); strict mode takes the whole argument, trimmed. With
`wrong_flag_ends=False` a wrong flag does not end the episode: the observation says so and the
agent goes on, as in the paper's multi-turn CTF runs.
"""

from __future__ import annotations

from typing import Any

from environments.base import ACTION_EXECUTED, StepResult
from environments.bash import BashEnv
from tasks import Task

WRONG_FLAG = "Submitted flag is incorrect. Keep trying!"


def flag_reward(argument: str, gold: str, strict: bool) -> float:
    flag = argument.strip() if strict else argument.split(" ")[0]
    return 1.0 if flag.lower() == gold.strip().lower() else 0.0


class CtfEnv(BashEnv):
    kind = "ctf"
    wrong_flag_ends = True

    def start_dir(self, task: Task) -> str:
        return f"/ctf/{task.meta.get('task_id', task.index)}"

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.task is not None
        reward = flag_reward(argument, self.task.gold_text, self.strict)
        return reward, {"agent_obs": argument, "reward": reward}

    async def _submit(self, argument: str) -> StepResult:
        result = await super()._submit(argument)
        if result.reward == 1 or self.wrong_flag_ends:
            return result
        self.done, self.observation = False, WRONG_FLAG
        return StepResult(WRONG_FLAG, 0.0, False, {ACTION_EXECUTED: True})
