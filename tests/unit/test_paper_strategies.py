"""The paper's four protocols, checked against what the original's scripts did, with scripted
models on the starter tasks (Bash on a Docker-free local sandbox, tests/local_starter.py; SQL in real
containers, MariaDB): the turn grammar, the parse, the clipping, the
reward per turn, the dialogue window and the forced submit (experiments/eval_n_turn.py,
eval_react.py, eval_plan_solve.py of ../shared/intercode-original)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from agents.base import get_strategy
from tests.scripted import ScriptedModel
from agents.strategies.rules import FORCED, paper_plan_steps, split_answer
from environments import make_environment
from environments.runtime import Runtime
from tasks import Task
from tests.local_starter import local_runtime, starter

GREP = "grep -c ERROR starter/logs/app.log"  # starter-bash/0's gold, on a local sandbox
LONG = "seq 1 1000"  # 3,892 characters of output


@pytest.fixture
async def local() -> AsyncIterator[Runtime]:
    """No Docker, for the Bash tasks."""
    async with local_runtime() as runtime:
        yield runtime


def task(kind: str, index: int = 0) -> Task:
    return starter(kind, index)


async def play(runtime: Runtime, strategy: str, task: Task, outputs: Sequence[str], max_turns: int = 5):
    model = ScriptedModel(outputs)
    async with make_environment(task.kind, runtime) as env:
        outcome = await get_strategy(strategy).run(env, task, model, max_turns=max_turns)
    return outcome, model


def users(messages: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


# ---------------------------------------------------------------- Single and Try Again (eval_n_turn)

async def test_try_again_parses_as_the_paper_and_keeps_the_parse_in_the_dialogue(local):
    outputs = ["Let me look.\n```BASH\nLS -LA STARTER\n```", f"bash: {GREP}"]
    outcome, model = await play(local, "try_again", task("bash"), outputs)
    first, second = outcome.turns
    assert first.action == "ls -la starter" and first.executed  # fenced Bash is lower-cased
    assert first.reward < 1 and second.action == GREP and second.reward == 1.0
    assert outcome.status == "solved" and len(model.calls) == 2
    assistant = [m["content"] for m in model.calls[1] if m["role"] == "assistant"]
    assert assistant == ["ls -la starter"]  # what the parser made of the answer, not the answer
    assert f"Reward: {first.reward}" in users(model.calls[1])[-1]


async def test_try_again_clips_text_to_1000_characters(local):
    _, model = await play(local, "try_again", task("bash"), [LONG, "submit"], max_turns=2)
    feedback = users(model.calls[1])[-1]
    assert "1\n2\n3" in feedback and "\n999\n" not in feedback and "truncated" not in feedback
    assert len(feedback) < 1000 + 400


async def test_try_again_keeps_the_last_five_messages(local):
    outputs = [f"echo x{n}" for n in range(5)]
    _, model = await play(local, "try_again", task("bash"), outputs, max_turns=5)
    last = model.calls[-1]
    assert [m["role"] for m in last[:2]] == ["system", "user"] and len(last) == 2 + 5
    assert last[2]["role"] == "user" and "echo x0" not in str(last[2:])  # the oldest messages are gone


async def test_an_answer_the_original_parser_raised_on_ends_the_episode(local):
    outcome, model = await play(local, "try_again", task("bash"), ["Command: ls", "never asked"])
    assert len(outcome.turns) == 1 and outcome.turns[0].reward == 0.0 and len(model.calls) == 1


# ---------------------------------------------------------------- ReAct (eval_react)

def test_react_splits_thought_and_action_as_the_paper():
    assert split_answer("Thought 2: look\nAction 2: execute[ls]\nObservation 2: made up", 2) == ("look", "execute[ls]")
    assert split_answer("I will look.\nAction: execute[ls]", 1) == ("I will look.", None)  # unnumbered: no action


async def test_react_scores_only_the_submission(local):
    outputs = ["Thought 1: count them\nAction 1: execute[grep -c ERROR starter/logs/app.log]\nObservation 1: 99",
               "Thought 2: that is it\nAction 2: submit"]
    outcome, model = await play(local, "react", task("bash"), outputs)
    assert [t.reward for t in outcome.turns] == [0.0, 1.0] and outcome.status == "solved"
    assert users(model.calls[1])[-1].startswith("Observation 1: ") and "99" not in users(model.calls[1])[-1]


async def test_react_no_code_and_a_missing_action_line(local):
    outputs = ["Thought 1: hm\nAction 1: ls starter",  # not execute[...]: no code
               "Thought 2: let me think about it",  # no Action line: asked once more
               "Action 2: execute[seq 1 1000]",
               "Thought 3: done\nAction 3: submit"]
    outcome, model = await play(local, "react", task("bash"), outputs)
    assert outcome.turns[0].action is None and outcome.turns[0].reward == 0.0 and "execute" in outcome.turns[0].observation
    assert outcome.turns[1].action == "seq 1 1000" and len(outcome.turns[1].observation) == 350  # clipped
    assert len(model.calls) == 4 and outcome.turns[2].action == "submit"


async def test_react_submits_for_the_model_after_max_turns(local):
    outputs = [f"Thought {n}: look\nAction {n}: execute[ls starter]" for n in (1, 2)]
    outcome, _ = await play(local, "react", task("bash"), outputs, max_turns=2)
    assert len(outcome.turns) == 3 and outcome.turns[-1].action == "submit" and outcome.turns[-1].output == FORCED
    assert outcome.status == "max_turns" and [t.reward for t in outcome.turns[:2]] == [0.0, 0.0]


# ---------------------------------------------------------------- Plan & Solve (eval_plan_solve)

def test_the_plan_is_read_with_the_papers_pattern():
    assert paper_plan_steps("Plan:\n1. look around\n2. count\nthe lines 3. answer") == [
        "look around", "count\nthe lines", "answer"]
    assert paper_plan_steps("- no numbers here") == []


async def test_plan_solve_runs_every_step_even_after_reward_one(local):
    outputs = ["1. count the errors\n2. check again", f"bash: {GREP}", "```bash\nls starter\n```"]
    outcome, model = await play(local, "plan_solve", task("bash"), outputs)
    assert [t.reward == 1.0 for t in outcome.turns] == [True, False] and outcome.success
    assert users(model.calls[1])[-1] == "Step: count the errors"
    assert users(model.calls[2])[-1].startswith("Observation: ") and users(model.calls[2])[-1].endswith(
        "\nStep: check again")


async def test_plan_solve_refine_has_three_turns_and_stops_at_reward_one(local):
    outputs = ["1. list the data", "```bash\nseq 1 1000\n```", "```bash\nls\n```", f"bash: {GREP}", "unused"]
    outcome, model = await play(local, "plan_solve_refine", task("bash"), outputs)
    assert len(outcome.turns) == 3 and outcome.turns[-1].reward == 1.0 and len(model.calls) == 4
    assert model.calls[2][-2]["role"] == "system"  # the plan is done: one system message, then the output alone
    assert len(users(model.calls[2])[-1]) == 250


# ---------------------------------------------------------------- offline models answer in the strategy's form

async def test_the_oracle_answers_in_the_form_each_strategy_reads():
    from agents.models import OracleModel
    from agents.strategies.paper_parsing import paper_action, react_action
    from environments.kind import kind_spec

    oracle = OracleModel()
    for kind in ("bash", "sql", "python", "ctf"):
        gold = task(kind)
        first = (await oracle.complete([], task=gold, turn=0, style="paper"))
        action, is_code = paper_action(first, kind_spec(kind))
        expected = gold.gold_text if kind != "ctf" else f"submit {gold.gold_text}"
        assert is_code and " ".join(action.split()) == " ".join(expected.split()), (kind, first, action)
    react = await oracle.complete([], task=task("bash"), turn=0, style="react")
    assert split_answer(react, 1)[1] == f"execute[{GREP}]" and react_action(f"execute[{GREP}]", kind_spec("bash")) == (GREP, True)
    assert split_answer(await oracle.complete([], task=task("bash"), turn=1, style="react"), 2)[1] == "submit"


async def test_the_oracle_solves_every_paper_protocol_in_bash(local):
    await _oracle_solves_every_paper_protocol(local, "bash")


async def _oracle_solves_every_paper_protocol(runtime, kind):
    from agents.models import OracleModel

    for strategy in ("single", "try_again", "react", "plan_solve", "plan_solve_refine"):
        async with make_environment(kind, runtime) as env:
            outcome = await get_strategy(strategy).run(env, task(kind), OracleModel(), max_turns=3)
        assert outcome.success, (strategy, kind, outcome.turns)
