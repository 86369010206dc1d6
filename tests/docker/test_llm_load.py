"""100 episodes at once against a provider limited to 120 requests/min: all complete, none fails."""

from __future__ import annotations

import asyncio
import re
import uuid

import aiodocker
import pytest

from agents import LLMModel, get_strategy
from agents.base import EpisodeOutcome
from agents.llm import LLMClient, ModelLimits, ModelSpec, RetryPolicy
from agents.llm.server import Rule, ScriptedLLMServer, ServerConfig
from environments import make_environment
from environments.runtime import Runtime
from tasks import Task, load_tasks
from tests.conftest import containers_of_run, require_image

MODEL = "openai/gpt-4o-mini"


async def episode(runtime: Runtime, task: Task, model: LLMModel) -> EpisodeOutcome:
    async with make_environment("sql", runtime) as env:
        return await get_strategy("single").run(env, task, model, max_turns=1)


@pytest.mark.slow
@pytest.mark.docker
async def test_100_episodes_under_120_rpm_all_complete(docker: aiodocker.Docker) -> None:
    await require_image(docker, "intercode/sql-starter")
    tasks = load_tasks("starter-sql")
    # The provider answers each task's question with its gold query, so every episode can succeed.
    rules = [Rule(pattern=re.escape(task.query[:40]), answer=f"```sql\n{task.gold_text}\n```") for task in tasks]
    async with ScriptedLLMServer(ServerConfig(rpm=120, latency=0.05, rules=rules)) as server:
        spec = ModelSpec(name=MODEL, api_base=f"{server.base_url}/v1", api_key="sk-load-test",
                         limits=ModelLimits(rpm=120, max_concurrency=16))
        client = LLMClient([spec], retry=RetryPolicy(max_total_wait=180))
        model = LLMModel(client, MODEL)
        run_id = f"test-{uuid.uuid4().hex[:8]}"
        started = asyncio.get_running_loop().time()
        async with Runtime.open(run_id=run_id) as runtime:
            outcomes = await asyncio.gather(*(episode(runtime, tasks[i % len(tasks)], model) for i in range(100)))
        elapsed = asyncio.get_running_loop().time() - started
        assert not await containers_of_run(docker, run_id)
    stats = client.stats(MODEL)
    assert [o.status for o in outcomes if o.status in ("model_error", "budget_exhausted")] == []
    assert sum(o.success for o in outcomes) == 100
    assert (stats.succeeded, stats.failed, stats.in_flight, stats.waiting) == (100, 0, 0, 0)
    assert stats.rate_limited <= 2  # paced by the client, so the provider barely ever refuses
    assert len(server.requests) == 100 + stats.rate_limited
    assert 40 < elapsed < 150, elapsed  # paced to the rpm, not run one by one (the upper bound leaves room for load)
