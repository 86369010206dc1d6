"""The rest of Harbor's task format: services beside the agent's container (compose), the image's
ENTRYPOINT, multi-step tasks, MCP servers, skills, artifacts, rewards without a headline, and a
verifier that needs the internet. The fixtures are tests/fixtures/harbor (solved by the oracle)
and tests/fixtures/harbor-failing (each failing its own way)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import aiodocker
import pytest

from agents.base import get_strategy
from agents.episode import play
from agents.models import OracleModel
from environments import make_environment
from environments.base import VerifierOffline
from environments.kind import gold_actions
from environments.runtime import Runtime
from foundation.errors import SandboxError
from foundation.pool.ownership import MANAGED, OWNER, Owner
from foundation.settings import PROJECT_ROOT
from orchestrator.tasksets.resolve import prepare
from tasks.harbor import read_harbor
from tests.unit.test_harbor_format import HARBOR

FAILING = PROJECT_ROOT / "tests" / "fixtures" / "harbor-failing"


# ---------------------------------------------------------------- running (a real engine)

async def run_oracle(folder: Path, *, actions: list[str] | None = None, episodes: int = 1) -> list[dict]:
    """Each episode's reward, breakdown, failure and what the environment offered."""
    task_set = await prepare(folder)
    task = task_set.tasks[0]
    found = []
    async with Runtime.open(images=task_set.pools()) as runtime:
        for _ in range(episodes):
            async with make_environment("harbor", runtime) as env:
                await env.reset(task, multi_turn=True)
                seen = {"servers": env.tool_servers(), "skills": env.skills(), "observations": []}
                for action in gold_actions(task) if actions is None else actions:
                    if env.done:
                        break
                    step = await env.step(action)
                    seen["observations"].append(step.observation)
                found.append({**seen, "reward": env.reward, "done": env.done, "breakdown": env.breakdown(),
                              "failure": env.failure})
    return found


async def managed(pid: int | None = None) -> tuple[list[str], list[str]]:
    """The containers and networks of the pools of process `pid` (this one's by default): other
    tests' runs may hold theirs meanwhile."""
    mine = str(Owner.me()) if pid is None else None

    def owned(labels: dict[str, str]) -> bool:
        owner = Owner.parse(labels.get(OWNER, ""))
        return owner is not None and (str(owner) == mine if mine else owner.pid == pid)

    async with aiodocker.Docker() as docker:
        containers = await docker.containers.list(all=True, filters={"label": [MANAGED]})
        networks = await docker.networks.list(filters={"label": [MANAGED]})
    return ([c.id for c in containers if owned(c["Labels"])],
            [n["Name"] for n in networks if owned(n.get("Labels") or {})])


@pytest.mark.docker
async def test_a_service_is_healthy_first_reached_by_name_and_its_state_is_the_episodes_own():
    first, second = await run_oracle(HARBOR / "service-api", episodes=2)
    for episode in (first, second):  # the second finds the API empty again: the group is new
        assert episode["reward"] == 1.0 and "the API holds: [{\"name\": \"apple\"}]" in episode["observations"][-1]
    assert first["breakdown"]["artifacts"] == [{"path": "/app/count.txt", "step": None, "size": 2, "text": "1\n",
                                                "truncated": False}]
    nothing = await run_oracle(HARBOR / "service-api", actions=["submit"])
    assert nothing[0]["reward"] == 0.0
    assert await managed() == ([], [])  # no container, no network left


# The agent replaces `du` (the size check the collection once asked the container for) and leaves a
# sparse file of 256 MB (no disk) where Harbor collects artifacts: read whole, it took the sweep's
# memory. Now the stream is counted on our side and closed past 16 MB (issue 45).
HOSTILE_ARTIFACT = ("printf '#!/bin/sh\\necho \"0 $2\"\\n' > /usr/bin/du && chmod +x /usr/bin/du && mkdir -p /logs/artifacts "
                    "&& truncate -s 256M /logs/artifacts/huge.bin && du -sb /logs/artifacts")


@pytest.mark.docker
async def test_an_artifact_larger_than_its_cap_is_not_read_whatever_the_container_says():
    (episode,) = await run_oracle(HARBOR / "hello-file", actions=[HOSTILE_ARTIFACT, "submit"])
    assert episode["observations"][0].strip() == "0 /logs/artifacts"  # the container's own word, a lie
    [kept] = [a for a in episode["breakdown"]["artifacts"] if a["path"] == "/logs/artifacts"]
    assert kept["note"] == "larger than 16 MB: not copied" and kept["text"] is None, kept
    assert 16 << 20 < kept["size"] <= (17 << 20) + (1 << 16), kept  # the stream closed just past the cap
    assert episode["failure"] is None


@pytest.mark.docker
async def test_the_images_entrypoint_runs_as_harbor_runs_it():
    (episode,) = await run_oracle(HARBOR / "entrypoint-gateway")
    assert episode["reward"] == 1.0  # the gateway it starts answers before the agent's first action


@pytest.mark.docker
async def test_a_multi_step_task_runs_each_step_and_scores_their_mean():
    (episode,) = await run_oracle(HARBOR / "multi-step")
    assert episode["reward"] == 1.0 and "Step 2 of 2 (extend)" in episode["observations"][1]
    steps = episode["breakdown"]["steps"]
    assert [(s["name"], s["reward"], s["stopped"]) for s in steps] == [("create", 1.0, False), ("extend", 1.0, False)]
    kept = [(a["path"], a["step"]) for a in episode["breakdown"]["artifacts"]]
    assert kept == [("/app/notes.txt", "create"), ("/app/seed.txt", "create"), ("/app/notes.txt", "extend")]
    (half,) = await run_oracle(HARBOR / "multi-step", actions=[gold_actions(read_harbor(HARBOR / "multi-step", "h")[0])[0],
                                                               "submit", "submit"])
    assert half["reward"] == 0.5 and half["done"]  # the second step's 0 counts in the mean


@pytest.mark.docker
async def test_the_oracle_solves_a_multi_step_task_under_plan_and_solve_too():
    """The oracle's plan holds every step of the gold (issue 37: it planned the first action only,
    and the task scored 0.5 under plan_solve while `tasks check` said ok)."""
    task_set = await prepare(HARBOR / "multi-step")
    task = task_set.tasks[0]
    async with Runtime.open(images=task_set.pools()) as runtime:
        for strategy in ("plan_solve", "plan_solve_refine", "try_again"):
            async with make_environment("harbor", runtime) as env:
                outcome = await play(get_strategy(strategy), env, task, OracleModel(), max_turns=10)
            assert (outcome.reward, outcome.status) == (1.0, "solved"), (strategy, outcome)


@pytest.mark.docker
async def test_a_step_below_its_min_reward_stops_the_task():
    (episode,) = await run_oracle(FAILING / "step-stops-early")
    assert episode["done"] and episode["reward"] == 0.0 and "below its min_reward" in episode["observations"][-1]
    assert [(s["name"], s["stopped"]) for s in episode["breakdown"]["steps"]] == [("first", True)]


@pytest.mark.docker
async def test_rewards_without_a_headline_skills_and_mcp_servers_are_offered():
    (dimensions,) = await run_oracle(HARBOR / "reward-dimensions")
    assert dimensions["reward"] == 1.0 and dimensions["breakdown"] == {"correctness": 1.0, "style": 1.0}
    (skills,) = await run_oracle(HARBOR / "skills")
    assert [(s.name, s.path) for s in skills["skills"]] == [("csv-column-sum", "/opt/skills/csv-column-sum")]
    assert skills["reward"] == 1.0
    task_set = await prepare(HARBOR / "mcp-lookup")
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task_set.tasks[0], multi_turn=True)
            (server,) = env.tool_servers()
            assert server.task_url == "http://mcp-server:8000/mcp" and server.transport == "streamable-http"
            call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
            request = urllib.request.Request(server.url, call, {"Content-Type": "application/json",
                                                                "Accept": "application/json, text/event-stream"})
            with urllib.request.urlopen(request, timeout=10) as answer:  # this process reaches it on the group's network
                assert json.load(answer)["result"]["tools"][0]["name"] == "lookup_code"


@pytest.mark.docker
async def test_a_service_that_never_turns_healthy_is_one_line_and_leaves_nothing():
    task_set = await prepare(FAILING / "service-never-healthy")
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            with pytest.raises(SandboxError) as raised:
                await env.reset(task_set.tasks[0], multi_turn=True)
    assert "service sick is unhealthy: its healthcheck said exit 1: the database is not ready" in str(raised.value)
    assert await managed() == ([], [])


@pytest.mark.docker
async def test_a_verifier_that_needs_the_internet_is_its_own_failure_never_the_models_zero():
    (episode,) = await run_oracle(FAILING / "verifier-offline-in-group")
    assert isinstance(episode["failure"], VerifierOffline) and episode["failure"].failure_class == "network"
    assert "tried to reach the internet (curl: (6) Could not resolve host: astral.sh)" in str(episode["failure"])


@pytest.mark.docker
async def test_a_group_left_by_a_killed_run_is_reaped_by_the_next(tmp_path):
    await prepare(HARBOR / "service-api")
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {str(PROJECT_ROOT)!r})
        from pathlib import Path
        from environments import make_environment
        from environments.runtime import Runtime
        from orchestrator.tasksets.resolve import prepare

        async def main():
            task_set = await prepare(Path({str(HARBOR / "service-api")!r}))
            async with Runtime.open(images=task_set.pools()) as runtime:
                async with make_environment("harbor", runtime) as env:
                    await env.reset(task_set.tasks[0], multi_turn=True)
                    print("leased", flush=True)
                    await asyncio.sleep(600)
        asyncio.run(main())
        """))
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
                              env={**os.environ, "CI": os.environ.get("CI", "")})
    try:
        assert holder.stdout is not None
        lines = iter(holder.stdout.readline, "")
        assert any(line.strip() == "leased" for line in lines)  # its logs come first
        containers, networks = await managed(holder.pid)
        assert len(containers) >= 2 and networks  # the agent's container, its service, their network
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    time.sleep(0.2)
    async with Runtime.open(images={}) as runtime:  # the next start reaps what the killed run left
        assert runtime.pool is not None
    assert await managed(holder.pid) == ([], [])


@pytest.mark.docker
async def test_the_tools_strategy_calls_the_tasks_mcp_server_inside_the_episodes_network():
    from agents.base import get_strategy
    from agents.llm import LLMClient, ModelSpec, RetryPolicy
    from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig
    from agents.llm.transport import InProcessTransport
    from agents.models import LLMModel
    from agents.episode import play

    def call(name: str, arguments: dict) -> ScriptedToolCall:
        return ScriptedToolCall(name=name, arguments=json.dumps(arguments))

    # the MCP tool first; once its answer (the code) is the last message, the shell writes it, then submit
    script = ServerConfig(default_answer="Let me look it up.",
                          default_tool_calls=[call("codes__lookup_code", {"project": "alpha"})],
                          rules=[Rule(pattern=r"^A-4417$", answer="Found it.",
                                      tool_calls=[call("shell", {"command": "echo A-4417 > /app/code.txt"}),
                                                  call("submit", {})])])
    task_set = await prepare(HARBOR / "mcp-lookup")
    async with ScriptedLLMServer(script) as llm, Runtime.open(images=task_set.pools()) as runtime:
        spec = ModelSpec(name="openai/gpt-scripted", api_base=f"{llm.base_url}/v1", api_key="sk-local", timeout=10)
        client = LLMClient([spec], retry=RetryPolicy(max_attempts=1), transport=InProcessTransport())
        async with make_environment("harbor", runtime) as env:
            outcome = await play(get_strategy("tools"), env, task_set.tasks[0], LLMModel(client, "openai/gpt-scripted"),
                                 max_turns=4)
    lookup, shell, submit = outcome.turns
    assert (lookup.action, lookup.observation) == ('mcp:codes.lookup_code {"project": "alpha"}', "A-4417")
    assert shell.action == "echo A-4417 > /app/code.txt" and submit.reward == 1.0 and outcome.status == "solved"
    offered = [tool["function"]["name"] for tool in (llm.requests[0].body or {})["tools"]]
    assert offered == ["shell", "submit", "codes__lookup_code"]


@pytest.mark.docker
async def test_a_steps_time_running_out_verifies_that_step_and_goes_on_to_the_next(tmp_path):
    import shutil
    folder = shutil.copytree(HARBOR / "multi-step", tmp_path / "multi-step")
    text = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(text.replace("min_reward = 1.0\n", "").replace("timeout_sec = 120.0", "timeout_sec = 1.0"))
    task_set = await prepare(folder)
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task_set.tasks[0], multi_turn=True)
            await env.step("sleep 1.5")
            late = await env.step("true")  # the first step's time is up: its tests run instead
            assert "time (1 s) is up" in late.observation and "Step 2 of 2 (extend)" in late.observation
            assert not late.done and not env.done


@pytest.mark.docker
async def test_a_group_given_back_is_made_anew_ahead_of_the_next_lease():
    task_set = await prepare(HARBOR / "service-api")
    task = task_set.tasks[0]
    async with Runtime.open(images=task_set.pools()) as runtime:
        async with make_environment("harbor", runtime) as env:
            await env.reset(task, multi_turn=True)
            first = env.sandbox.container_id if env.sandbox else None
        deadline = time.monotonic() + 60
        while runtime.pool.stats()[task.image].get("idle", 0) < 1:  # no lease asks: the pool makes it itself
            assert time.monotonic() < deadline, runtime.pool.stats()
            await asyncio.sleep(0.2)  # between two looks at the pool
        async with make_environment("harbor", runtime) as env:
            await env.reset(task, multi_turn=True)
            assert env.sandbox is not None and env.sandbox.container_id != first  # a new group, not the used one


# A process the agent leaves running, writing 1 into the reward file: with a separate verifier
# (Harbor's strong form, issue 47) it can't reach the verifier's container, whose reward is its tests'.
PLANTER = ("mkdir -p /logs/verifier && nohup bash -c 'while :; do mkdir -p /logs/verifier; echo 1 > "
           "/logs/verifier/reward.txt; sleep 0.01; done' >/dev/null 2>&1 & echo planted")


@pytest.mark.docker
async def test_a_reward_planted_by_the_agent_never_reaches_a_separate_verifier():
    (episode,) = await run_oracle(HARBOR / "separate-verifier", actions=[PLANTER, "echo 41 > /app/answer.txt", "submit"])
    assert episode["observations"][0].strip() == "planted"
    assert episode["reward"] == 0.0 and episode["failure"] is None, episode
    (solved,) = await run_oracle(HARBOR / "separate-verifier", actions=[PLANTER, "echo 42 > /app/answer.txt", "submit"])
    assert solved["reward"] == 1.0, solved  # its artifact carried, its planted reward not
