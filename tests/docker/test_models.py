"""The models: LLMModel over the scripted server, the oracle and replay through a real strategy,
and resolve_model's one-line refusals, which come before any container exists."""

from __future__ import annotations

import uuid
from pathlib import Path

import aiodocker
import pytest

from agents import OracleModel, get_strategy
from environments import make_environment
from environments.runtime import Runtime
from foundation.errors import ConfigError
from orchestrator.fidelity.replay_model import ReplayModel
from tests.conftest import containers_of_run, require_image
from tests.unit.test_models import first, one_line_error, trajectory

KINDS = ("bash", "sql", "python", "ctf")


@pytest.mark.docker
async def test_refusals_start_no_container(docker: aiodocker.Docker, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = {c.id for c in await docker.containers.list(all=True)}
    for name in ("gpt-99-turbo", "gpt-4o", "replay:/nonexistent.json"):
        one_line_error(name)
    with pytest.raises(ConfigError):
        get_strategy("nope")
    assert {c.id for c in await docker.containers.list(all=True)} <= before


# ---------------------------------------------------------------- through a strategy, real containers

@pytest.mark.docker
@pytest.mark.parametrize("strategy", ["single", "try_again"])
async def test_oracle_reaches_reward_one_on_every_kind(docker: aiodocker.Docker, strategy: str):
    tasks = [first(kind) for kind in KINDS]
    for image in {t.image for t in tasks}:
        await require_image(docker, image)
    run_id = f"test-{uuid.uuid4().hex[:8]}"
    try:
        async with Runtime.open(run_id=run_id) as runtime:
            for task in tasks:
                async with make_environment(task.kind, runtime) as env:
                    outcome = await get_strategy(strategy).run(env, task, OracleModel(), max_turns=3)
                assert outcome.reward == 1.0, (task.id, outcome)
                assert outcome.success
    finally:
        assert not await containers_of_run(docker, run_id)


@pytest.mark.docker
async def test_replay_through_try_again_solves_on_the_recorded_turn(docker: aiodocker.Docker, tmp_path: Path):
    task = first("sql")
    await require_image(docker, task.image)
    model = ReplayModel(trajectory(tmp_path, task, ["SELECT 1", task.gold_text, "submit"]))
    async with Runtime.open() as runtime, make_environment("sql", runtime) as env:
        outcome = await get_strategy("try_again").run(env, task, model, max_turns=5)
    assert [t.action for t in outcome.turns] == ["SELECT 1", task.gold_text]
    assert [t.reward for t in outcome.turns][-1] == 1.0 and outcome.success
