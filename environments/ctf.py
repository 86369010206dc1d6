"""The Capture-the-Flag environment: Bash in the task's asset directory, scored by the flag.

The episode starts in /ctf/<task_id> (the original's `cd /ctf/<task_id>` preprocess). `submit FLAG`
scores 1 when FLAG equals the gold flag, ignoring case. The original took only the first word after
`submit` (its `split(" ")[1]`); strict mode takes the whole argument, trimmed. In an episode reset
with `multi_turn=True` a wrong flag does not end the episode: the observation says so and the
agent goes on, as in the paper's multi-turn CTF runs. Its harness scored `submit FLAG` only.
"""

from __future__ import annotations

from typing import Any

from environments.base import ACTION_EXECUTED, StepResult
from environments.bash import SHELL_TAGS, BashEnv
from environments.kind import KindSpec, register
from tasks import Task

WRONG_FLAG = "Submitted flag is incorrect. Keep trying!"


def flag_reward(argument: str, gold: str, strict: bool) -> float:
    flag = argument.strip() if strict else argument.split(" ")[0]
    return 1.0 if flag.lower() == gold.strip().lower() else 0.0


class CtfEnv(BashEnv):
    kind = "ctf"
    scores_every_action = False
    gold_before_lease = False  # the flag is the gold: nothing to run

    def start_dir(self, task: Task) -> str:
        return f"/ctf/{task.meta.get('task_id', task.index)}"

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.task is not None
        reward = flag_reward(argument, self.task.gold_text, self.strict)
        return reward, {"agent_obs": argument, "reward": reward}

    def breakdown(self) -> dict[str, Any] | None:
        """Whether the submitted flag is the task's (the whole reward), and what was submitted."""
        if "agent_obs" not in self.score_info:
            return None
        return {"flag_correct": self.score_info.get("reward") == 1.0,
                "submitted": str(self.score_info["agent_obs"])[:200]}

    async def _submit(self, argument: str) -> StepResult:
        result = await super()._submit(argument)
        if result.reward == 1 or not self.multi_turn:
            return result
        self.done, self.observation = False, WRONG_FLAG
        return StepResult(WRONG_FLAG, 0.0, False, {ACTION_EXECUTED: True})


def _submit_flag(task: Task) -> list[str]:
    return [f"submit {task.gold_text}"]


def _without_cmd(action: str) -> str:
    """The older CTF harness prefixed shell commands with `cmd `."""
    return action.strip()[4:] if action.strip().startswith("cmd ") else action


SPEC = register(KindSpec(
    name="ctf", environment=CtfEnv, language="BASH", setting="Ubuntu machine", fence="bash", fence_tags=SHELL_TAGS,
    export_name="ic_ctf", datasets=("ctf",), starter="starter-ctf", gold_actions=_submit_flag,
    submit_argument=" <flag>", submit_meaning="give the flag you found", shows_reward=False,
    paper_parser="ctf", recorded_action=_without_cmd, tool="bash", tool_argument="command",
    tool_description="Run a Bash command on the Ubuntu machine, in the directory of the challenge's files, and return "
                     "what it printed. Python is available too (python3 -c ...)."))
