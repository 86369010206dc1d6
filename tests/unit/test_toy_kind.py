"""A new environment kind, defined in this module alone (no edit anywhere else), runs through a
strategy, a sweep, export and replay: the kind spec is the one seam a kind needs.

The toy kind is a calculator: an action is an arithmetic expression, its observation the value;
`submit` scores 1 when the last value is the task's gold. It needs no container (image "").
"""

from __future__ import annotations

import ast
import json
import operator
from dataclasses import replace
from typing import Any

import pytest

from agents.base import get_strategy
from agents.models import OracleModel, fenced
from agents.parsing import extract_action
from agents.strategies.turns import prompt
from environments import make_environment
from environments.base import Environment
from environments.kind import KindSpec, kind_names, kind_spec, register
from foundation.errors import ConfigError
from tasks import DatasetInfo, Task, load_tasks, register_dataset

OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
SUMS = [{"query": "What is 6 times 7?", "gold": "6*7"}, {"query": "Add 2 and 3.", "gold": "2+3"},
        {"query": "What is 10 minus 4?", "gold": "10-4"}]


def value(node: ast.AST) -> int:
    if isinstance(node, ast.Expression):
        return value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](value(node.left), value(node.right))
    raise ValueError("not arithmetic")


class CalculatorEnv(Environment):
    kind = "toy"

    async def _start(self, task: Task) -> None:
        self.expected = value(ast.parse(task.gold_text, mode="eval"))

    async def _execute(self, action: str) -> tuple[str, bool]:
        try:
            return str(value(ast.parse(action.strip(), mode="eval"))), True
        except (SyntaxError, ValueError):
            return "not an arithmetic expression", False

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        return (1.0 if self.observation == str(self.expected) else 0.0), {"agent_obs": self.observation}

    async def _stop(self) -> None:
        pass


SPEC = register(KindSpec(name="toy", environment=CalculatorEnv, language="ARITHMETIC", setting="calculator",
                         fence="calc", fence_tags=frozenset({"calc"}), export_name="ic_toy", datasets=("toy-sums",)))


@pytest.fixture(scope="module")
def toy_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    path = tmp_path_factory.mktemp("toy") / "sums.json"
    path.write_text(json.dumps(SUMS))
    register_dataset(DatasetInfo("toy-sums", "toy", "", str(path)))
    return load_tasks("toy-sums")


def test_the_spec_is_what_the_system_reads(toy_tasks):
    assert kind_spec("toy") is SPEC
    assert extract_action("```calc\n1+1\n```", SPEC) == "1+1"
    assert extract_action("```bash\nls\n```", SPEC) is None  # another kind's fence is not code here
    assert fenced(toy_tasks[0], "6*7") == "```calc\n6*7\n```"
    assert "ARITHMETIC" in prompt("system", SPEC, reward_note="")


def test_the_environment_carries_its_spec_and_its_class_is_one_kinds():
    assert CalculatorEnv.spec is SPEC and make_environment("toy", None).spec is SPEC  # type: ignore[arg-type]
    assert (SPEC.tool_name, SPEC.prompt_family, SPEC.submit_parameter) == ("calc", "toy", "")
    flagged = replace(SPEC, submit_argument=" <flag>", tool="shell", prompts="task")  # derived again
    assert (flagged.tool_name, flagged.prompt_family, flagged.submit_parameter) == ("shell", "task", "flag")
    with pytest.raises(ConfigError, match="class of its own"):  # one class, two kinds' specs: refused
        register(replace(SPEC, name="toy-two"))
    assert CalculatorEnv.spec is SPEC and "toy-two" not in kind_names()


@pytest.mark.parametrize("strategy", ["try_again", "try_again_fenced", "react", "single"])
async def test_a_strategy_runs_the_toy_kind_without_docker(toy_tasks, strategy):
    async with make_environment("toy", None) as env:  # type: ignore[arg-type] — no runtime needed
        outcome = await get_strategy(strategy).run(env, toy_tasks[0], OracleModel(), max_turns=3)
    assert outcome.success, outcome
    assert outcome.turns[0].observation == "42" or outcome.turns[0].action == "6*7"
