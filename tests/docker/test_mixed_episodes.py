"""50 episodes of all four kinds at once: every reward equals the one the same actions get alone."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from environments import make_environment
from environments.kind import gold_actions
from environments.runtime import Runtime
from tasks import Task, load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WRONG = {
    "bash": lambda task: ["mkdir -p /starter/wrong && echo wrong > /starter/wrong/answer.txt", "submit"],
    "sql": lambda task: ["SELECT 1", "submit"],
    "python": lambda task: ["def nothing():\n    return None", "submit nothing"],
    "ctf": lambda task: ["cat *", "submit starter{not_the_flag}"],
}


async def play(runtime: Runtime, task: Task, actions: list[str]) -> float:
    async with make_environment(task.kind, runtime) as env:
        await env.reset(task)
        step = None
        for action in actions:
            step = await env.step(action)
        assert step is not None and step.done
        return step.reward


async def test_fifty_mixed_episodes_at_once_have_no_cross_talk():
    tasks = [t for kind in ("bash", "sql", "python", "ctf") for t in load_tasks(f"starter-{kind}")]
    plans = [(task, actions) for task in tasks for actions in (gold_actions(task), WRONG[task.kind](task))]
    async with Runtime.open() as runtime:
        alone = {}
        for task, actions in plans:  # one at a time: the reference
            alone[(task.id, tuple(actions))] = await play(runtime, task, actions)
        assert all(alone[(t.id, tuple(gold_actions(t)))] == 1.0 for t in tasks)
        assert all(alone[(t.id, tuple(WRONG[t.kind](t)))] < 1.0 for t in tasks)
        episodes = list(itertools.islice(itertools.cycle(plans), 50))
        together = await asyncio.gather(*(play(runtime, task, actions) for task, actions in episodes))
    mismatches = [(task.id, actions[0][:30], alone[(task.id, tuple(actions))], got)
                  for (task, actions), got in zip(episodes, together) if got != alone[(task.id, tuple(actions))]]
    assert mismatches == []
    assert len({task.kind for task, _ in episodes}) == 4
