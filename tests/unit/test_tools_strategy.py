"""The `tools` strategy (native function calling) with scripted tool answers and the oracle, on the
Docker-free sandbox (tests/local_starter.py): Bash, Python and CTF starter tasks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from agents.base import EpisodeOutcome, ToolAnswer, get_strategy
from agents.models import OracleModel
from tests.scripted import ScriptedModel, called
from agents.strategies.turns import retry_message
from agents.strategies.tools import rendered, tool_schemas
from environments import make_environment
from environments.kind import kind_spec
from environments.runtime import Runtime
from foundation.errors import ConfigError
from orchestrator.fidelity.replay_model import ReplayModel
from tasks import Task
from tests.local_starter import local_runtime, starter

GOLD = "grep -c ERROR starter/logs/app.log"  # starter-bash/0 on a local sandbox; it prints 2


@pytest.fixture
async def local() -> AsyncIterator[Runtime]:
    async with local_runtime() as runtime:
        yield runtime


async def play(runtime: Runtime, task: Task, model: object, max_turns: int = 5) -> EpisodeOutcome:
    async with make_environment(task.kind, runtime) as env:
        return await get_strategy("tools").run(env, task, model, max_turns=max_turns)


def bash(command: str) -> tuple[str, dict[str, str]]:
    return "bash", {"command": command}


async def test_the_calls_of_one_answer_run_in_order_with_one_observation_each(local: Runtime) -> None:
    first = called(bash("echo one > new.txt"), bash("cat new.txt"), text="Let me look.")  # the second needs the first
    model = ScriptedModel([first, called(bash(f"rm new.txt; {GOLD}"))])
    outcome = await play(local, starter("bash"), model)
    assert [t.action for t in outcome.turns] == ["echo one > new.txt", "cat new.txt", f"rm new.txt; {GOLD}"]
    assert [t.observation.strip() for t in outcome.turns] == ["", "one", "2"]
    assert all(t.executed for t in outcome.turns) and outcome.status == "solved" and outcome.success
    assert outcome.turns[0].reward < 1.0 and outcome.turns[2].reward == 1.0
    # each turn keeps its whole answer: the text, then a line per call
    assert outcome.turns[0].output == outcome.turns[1].output == rendered(first)
    assert rendered(first).splitlines() == ["Let me look.", 'bash({"command": "echo one > new.txt"})',
                                            'bash({"command": "cat new.txt"})']
    # the second ask sees the answer with its calls, then one tool message per call, by id, in order
    assistant, *results = model.calls[1][-3:]
    assert [c["id"] for c in assistant["tool_calls"]] == [c.id for c in first.tool_calls]
    assert assistant["content"] == "Let me look."
    assert [(m["role"], m["tool_call_id"]) for m in results] == [("tool", c.id) for c in first.tool_calls]
    assert results[1]["content"].startswith("one\n") and "Reward: " in results[1]["content"]
    assert results[0]["content"].startswith("No output")


async def test_the_tools_offered_are_the_kinds_and_submit(local: Runtime) -> None:
    model = ScriptedModel([called(bash(GOLD))])
    await play(local, starter("bash"), model)
    (offered,) = model.offered
    assert [t["function"]["name"] for t in offered] == ["bash", "submit"]
    assert offered[0]["function"]["parameters"]["required"] == ["command"]
    assert offered[1]["function"]["parameters"]["required"] == []
    ctf, python = tool_schemas(kind_spec("ctf")), tool_schemas(kind_spec("python"))
    assert [t["function"]["name"] for t in ctf] == ["bash", "submit"]
    assert ctf[1]["function"]["parameters"]["required"] == ["flag"]
    assert [t["function"]["name"] for t in python] == ["python", "submit"]
    assert python[1]["function"]["parameters"]["required"] == ["function_name"]
    assert model.calls[0][0]["role"] == "system" and "`bash` tool" in model.calls[0][0]["content"]


async def test_an_answer_without_a_call_gets_the_retry_message_and_runs_nothing(local: Runtime) -> None:
    model = ScriptedModel(["I would count the errors.", called(bash(GOLD))])
    outcome = await play(local, starter("bash"), model)
    turn = outcome.turns[0]
    assert (turn.output, turn.action, turn.executed, turn.reward) == ("I would count the errors.", None, False, 0.0)
    assert turn.observation == retry_message(kind_spec("bash"))
    assert model.calls[1][-2:] == [{"role": "assistant", "content": "I would count the errors."},
                                   {"role": "user", "content": retry_message(kind_spec("bash"))}]
    assert outcome.status == "solved"


async def test_a_bad_call_is_an_observation_and_runs_nothing(local: Runtime) -> None:
    bad = called(("shell", {"command": "touch a"}), ("bash", '{"command": "touch b"'), ("bash", {"cmd": "touch c"}),
                 ("bash", '"touch d"'), bash("ls"))
    model = ScriptedModel([bad, called(bash(GOLD))])
    outcome = await play(local, starter("bash"), model)
    *wrong, listing, solved = outcome.turns
    assert [(t.action, t.executed, t.reward) for t in wrong] == [(None, False, 0.0)] * 4
    assert all(t.observation.startswith("No BASH code was run: ") for t in wrong)
    assert "no tool named 'shell'" in wrong[0].observation and "not JSON" in wrong[1].observation
    assert "lack 'command'" in wrong[2].observation and "not a JSON object" in wrong[3].observation
    assert 'Call bash with {"command": "..."}, or submit with {}.' in wrong[0].observation
    assert listing.action == "ls" and set(listing.observation.split()) == {"starter"}  # nothing was touched
    assert solved.reward == 1.0
    results = [m for m in model.calls[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [c.id for c in bad.tool_calls]
    assert [m["content"] for m in results[:4]] == [t.observation for t in wrong]


async def test_submit_ends_the_episode_and_scores_it(local: Runtime) -> None:
    model = ScriptedModel([called(bash("ls starter"), ("submit", "{}"), bash("echo never"))])
    outcome = await play(local, starter("bash"), model)
    assert [t.action for t in outcome.turns] == ["ls starter", "submit"]
    assert outcome.status == "submitted" and outcome.turns[1].reward < 1.0 and len(model.calls) == 1


async def test_a_wrong_flag_goes_on_and_the_right_one_solves(local: Runtime) -> None:
    task = starter("ctf")
    model = ScriptedModel([called(("submit", {"flag": "nope{}"})), called(("submit", {"flag": task.gold_text}))])
    outcome = await play(local, task, model)
    assert [t.action for t in outcome.turns] == ["submit nope{}", f"submit {task.gold_text}"]
    assert [t.reward for t in outcome.turns] == [0.0, 1.0] and outcome.status == "solved"
    feedback = model.calls[1][-1]
    assert feedback["role"] == "tool" and "incorrect" in feedback["content"] and "Reward" not in feedback["content"]


async def test_max_turns_bounds_the_answers_not_the_calls(local: Runtime) -> None:
    model = ScriptedModel([called(bash("ls"), bash("pwd")), "thinking", "never asked"])
    outcome = await play(local, starter("bash"), model, max_turns=2)
    assert len(outcome.turns) == 3 and len(model.calls) == 2 and outcome.status == "max_turns"


@pytest.mark.parametrize("kind", ["bash", "python", "ctf"])
async def test_the_oracle_solves_through_tools(local: Runtime, kind: str) -> None:
    task = starter(kind)
    outcome = await play(local, task, OracleModel(), max_turns=2)
    assert outcome.success and outcome.status == "solved", outcome
    answer = await OracleModel().complete_tools([], [], task=task, turn=0)
    assert answer.tool_calls[-1].name == "submit"  # the gold's calls, then submit: the first solved already
    if kind == "ctf":
        assert json.loads(answer.tool_calls[0].arguments) == {"flag": task.gold_text}


async def test_a_model_without_tool_calls_is_refused_before_the_episode(local: Runtime, tmp_path: Path) -> None:
    task = starter("bash")
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"0": {"environment": "ic_bash", "dataset": "x.json", "task_id": 0, "query": task.query,
                                      "turn_history": {"actions": [GOLD], "observations": [""], "rewards": [1.0],
                                                       "valid_action": [True]}}}))
    async with make_environment("bash", local) as env:
        refused = r"^model 'replay:.*run\.json' can't answer with tool calls.*ReplayModel has no complete_tools"
        with pytest.raises(ConfigError, match=refused):
            await get_strategy("tools").run(env, task, ReplayModel(path), max_turns=3)
        assert env.task is None  # never reset: nothing leased


async def test_a_tool_answer_is_refused_by_a_text_strategy(local: Runtime) -> None:
    outputs: Sequence[ToolAnswer] = [called(bash(GOLD))]
    async with make_environment("bash", local) as env:
        outcome = await get_strategy("try_again_fenced").run(env, starter("bash"), ScriptedModel(outputs), max_turns=2)
    assert outcome.status == "model_error" and "tool answer" in (outcome.error or "")
