"""The skills a task offers (Harbor's `[environment] skills_dir`) listed in the system prompt of our
strategies: each skill's name, description and the path of its SKILL.md in the container. They are
known once the environment is reset, which the first answer then waits for (a task whose
`offers_extras` says it may offer them); a task without skills gets the prompt as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.base import get_strategy
from tests.scripted import ScriptedModel, called
from agents.strategies.turns import prompt, skills_block
from environments.base import Environment, Skill
from environments.kind import KindSpec, register
from tasks import Task

PDF = Skill("pdf-forms", "Read and fill\n  PDF forms   with pdftk.", "/skills/pdf-forms/")
GIT = Skill("git-history", "Find who changed a line, and when.", "/opt/skills/git-history")


class SkilledEnv(Environment):
    """A shell-like kind without a container, scored at the end (as Harbor's), whose task offers
    the skills its meta lists, known only once its (slow) reset is done."""

    kind = "skills-toy"
    scores_every_action = False

    async def _start(self, task: Task) -> None:
        await asyncio.sleep(0.05)  # a first answer asked for meanwhile would see no skills
        self.offered = [Skill(**skill) for skill in task.meta["skills"]]

    async def _execute(self, action: str) -> tuple[str, bool]:
        return f"ran: {action}", True

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        return 0.0, {}

    async def _stop(self) -> None:
        pass

    def skills(self) -> list[Skill]:
        return list(self.offered)


register(KindSpec(name="skills-toy", environment=SkilledEnv, language="BASH", setting="toy shell", fence="bash",
                  fence_tags=frozenset({"bash"}), export_name="ic_skills_toy", datasets=(), tool="bash",
                  tool_argument="command", submit_at_end=True, shows_reward=False, prompts="task"))

SUBMIT = {"tools": called(("submit", {})), "single_fenced": "```bash\nsubmit\n```",
          "try_again_fenced": "```bash\nsubmit\n```"}


async def system_prompt(strategy: str, skills: list[Skill]) -> str:
    """The system prompt `strategy` sent with its first answer, on a task offering `skills`."""
    task = Task(kind="skills-toy", dataset="skills-toy", index=0, query="Fill in the form.", gold="", image="",
                meta={"skills": [{"name": s.name, "description": s.description, "path": s.path} for s in skills]},
                offers_extras=True)
    model = ScriptedModel([SUBMIT[strategy]])
    async with SkilledEnv(None) as env:  # type: ignore[arg-type]  # no runtime: nothing runs in a container
        outcome = await get_strategy(strategy).run(env, task, model, max_turns=1)
    assert outcome.turns[-1].action == "submit", outcome
    system = model.calls[0][0]
    assert system["role"] == "system"
    return str(system["content"])


@pytest.mark.parametrize("strategy", ["tools", "single_fenced", "try_again_fenced"])
async def test_the_system_prompt_lists_the_tasks_skills(strategy: str) -> None:
    system = await system_prompt(strategy, [PDF, GIT])
    block = system[system.index("\n\nSkills: "):]
    assert block.splitlines()[-2:] == [
        "- pdf-forms: Read and fill PDF forms with pdftk. (/skills/pdf-forms/SKILL.md)",
        "- git-history: Find who changed a line, and when. (/opt/skills/git-history/SKILL.md)"]
    assert "`cat` it" in block
    assert system.startswith(await system_prompt(strategy, []))  # the prompt as it was, then the block


@pytest.mark.parametrize("strategy", ["tools", "try_again_fenced"])
async def test_a_task_without_skills_gets_no_block(strategy: str) -> None:
    system = await system_prompt(strategy, [])
    assert "Skills:" not in system and "SKILL.md" not in system
    if strategy == "try_again_fenced":
        assert system == prompt("system", SkilledEnv.spec, reward_note="")


def test_a_long_description_is_cut_and_no_skills_is_no_block() -> None:
    long = Skill("big", "word " * 200, "/s/big")
    line = skills_block(SkilledEnv.spec, [long]).splitlines()[-1]
    assert line.startswith("- big: word word") and line.endswith("... (/s/big/SKILL.md)")
    assert len(line) < 300 + len("- big:  (/s/big/SKILL.md)") + 1
    assert skills_block(SkilledEnv.spec, []) == ""
