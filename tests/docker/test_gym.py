"""The synchronous gymnasium wrapper runs an episode of each kind, like the original API."""

from __future__ import annotations

import gymnasium as gym
import pytest

import environments.gym  # noqa: F401 — registers the ids
from environments.kind import gold_actions

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("kind", ["bash", "sql", "python", "ctf"])
def test_an_episode_of_each_kind(kind):
    env = gym.make(f"intercode-{kind}-v0")
    try:
        task = env.unwrapped.tasks[1]
        observation, info = env.reset(options={"index": 1})
        assert observation == task.query and info["index"] == 1
        reward, terminated = 0.0, False
        for action in gold_actions(task):
            observation, reward, terminated, truncated, _ = env.step(action)
            assert not truncated
        assert terminated and reward == 1.0
        env.reset(options={"index": 0})
        _, reward, terminated, _, _ = env.step("skip")
        assert terminated and reward == 0.0
    finally:
        env.close()


def test_module_prefixed_id_needs_no_import():
    env = gym.make("environments.gym:intercode-bash-v0")
    try:
        observation, _ = env.reset(options={"index": 0})
        assert "ERROR" in observation
    finally:
        env.close()
