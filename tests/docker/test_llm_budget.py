"""A spent budget stops model calls; the episode is marked as cut short, never scored as an answer."""

from __future__ import annotations

import uuid

import aiodocker
import pytest
from pydantic import SecretStr

from agents import LLMModel, get_strategy
from agents.llm import Budget, LLMClient, ModelSpec
from agents.llm.server import ScriptedLLMServer, ServerConfig
from environments import make_environment
from environments.runtime import Runtime
from tasks import load_tasks
from tests.conftest import containers_of_run, require_image


@pytest.mark.docker
async def test_an_episode_cut_by_the_budget_is_marked_and_not_scored(docker: aiodocker.Docker):
    await require_image(docker, "intercode/sql-starter")
    task = load_tasks("starter-sql")[0]
    answer = f"```sql\n{task.gold_text}\n```"
    async with ScriptedLLMServer(ServerConfig(default_answer="```sql\nSELECT 1\n```")) as server:
        budget = Budget(max_tokens=1)  # the first call spends it
        client = LLMClient([ModelSpec(name="openai/local", api_base=f"{server.base_url}/v1", api_key=SecretStr("k"))],
                           budget=budget)
        model = LLMModel(client, "openai/local")
        run_id = f"test-{uuid.uuid4().hex[:8]}"
        async with Runtime.open(run_id=run_id) as runtime:
            async with make_environment("sql", runtime) as env:
                outcome = await get_strategy("try_again").run(env, task, model, max_turns=5)
        assert not await containers_of_run(docker, run_id)
    assert answer not in [t.output for t in outcome.turns]
    assert outcome.status == "budget_exhausted" and not outcome.success
    assert len(outcome.turns) == 1, "one answered call, then the budget stopped the next"
    assert len(server.requests) == 1, "no request past the budget reached the provider"
    assert budget.exhausted and budget.spent_tokens > 0
