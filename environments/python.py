"""The Python environment (MBPP): one persistent interpreter per episode, through the driver.

Actions run the original's way (`PythonEnv.exec_action`): an action starting with `def ` runs as
is, any other through `wrap_with_print` (a bare expression gets printed; strict mode uses
`wrap_strict`, which fixes its quirks); one that Python can't parse reads
"Error executing action: <error>" and runs nothing. The observation is `str()` of the
interpreter's result dict, as the recorded trajectories show it: "{'output': '', 'error': ''}".
The interpreter lives in the leased container (op `python` of the driver) and dies with the lease.

`submit <function>` scores MBPP's tests (environments/rewards/python.py). The gold's results are
computed once per (image, task, mode), in a fresh interpreter of the first episode's container
while it is still pristine, and cached. `step_with_autosubmit` is the paper's harness rule.
"""

from __future__ import annotations

import ast
import re
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

from environments.base import ACTION_EXECUTED, Environment, HarnessStep, StepResult
from environments.gold import GoldKey
from environments.kind import KindSpec, TaskFile, register
from environments.rewards.python import (
    CODES_BEFORE_TESTS,
    MbppCheck,
    PythonGold,
    Result,
    by_test,
    failed_test,
    original_result,
    original_reward,
    strict_passed,
    strict_reward,
)
from foundation.errors import SandboxError
from foundation.pool import Sandbox
from foundation.sandbox import PythonRun
from tasks import Task

RETRY_MESSAGE = "Test case did not pass. Please try again."
# The original waited 30 s for each call (rpyc's sync_request_timeout) and had no other limit;
# the same per code here, for actions and tests. The gold, computed once, gets more room.
TIMEOUT = 30.0
GOLD_TIMEOUT = 120.0
MAX_TESTS_SHOWN = 10  # tests listed one by one in a turn's breakdown (MBPP tasks have three)
AUTOSUBMIT = re.compile(r"def (\w+)\(")  # the harness's pattern for the name to submit
AGENT_OBS, EVAL_OBS = "agent_obs", "eval_obs"  # the original's info keys for the two result sets
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)  # what ast.parse can raise


def wrap_with_print(command: str) -> str:
    """The original's rule (the version with `is_assert`): print the action unless it holds an
    assignment (`=` only: `+=` and annotated ones don't count), a call of `print`, an `import`
    (`from ... import` doesn't count) or starts with `assert`. Raises what ast.parse raises."""
    nodes = list(ast.walk(ast.parse(command.strip())))
    has_assignment = any(isinstance(node, ast.Assign) for node in nodes)
    has_print = any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
                    for node in nodes)
    has_import = any(isinstance(node, ast.Import) for node in nodes)
    is_assert = command.strip().startswith("assert")
    return command if has_assignment or has_print or has_import or is_assert else f"print({command})"


def wrap_strict(command: str) -> str:
    """Strict mode's rule: print the action when it is one expression that is not a call of
    `print`, as an interactive interpreter would (so `x += 1` and `from m import f` just run)."""
    body = ast.parse(command.strip()).body
    if len(body) == 1 and isinstance(body[0], ast.Expr):
        value = body[0].value
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print"):
            return f"print(\n{command.strip()}\n)"  # on lines of its own: a trailing comment can't eat the `)`
    return command


def defined_functions(code: str) -> list[str]:
    """Names of the functions an action defines at top level, in order ([] if it doesn't parse)."""
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return []
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


class PythonEnv(Environment):
    kind = "python"
    scores_every_action = False  # the harness scored a `def` (auto-submitted) and `submit` only

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self.sandbox: Sandbox | None = None
        self.last_function: str | None = None  # what `submit` with no name and `score()` submit
        self._stack: AsyncExitStack | None = None
        self._check: MbppCheck | None = None
        self._restarted = False
        self.timeout = TIMEOUT  # seconds per code (an action, a test); its interpreter is lost after

    @property
    def strict(self) -> bool:
        return self.runtime.reward_mode == "strict"

    async def _start(self, task: Task) -> None:
        self._stack = AsyncExitStack()
        self.sandbox = await self._stack.enter_async_context(self.runtime.pool.lease(task.image))
        self.last_function, self._restarted = None, False
        self._check = MbppCheck.of(task.gold_text, task.meta, strict=self.strict)
        if self._check.tests:
            await self.gold()  # the first episode of a task computes it here, before any action

    async def _stop(self) -> None:
        stack, self._stack, self.sandbox = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def step(self, action: str) -> StepResult:
        """As the base's; info["interpreter_restarted"] when a timeout or an exit lost the state before."""
        result = await super().step(action)
        if self._restarted:
            self._restarted = False
            return replace(result, info={**result.info, "interpreter_restarted": True})
        return result

    async def _execute(self, action: str) -> tuple[str, bool]:
        try:
            if action.strip().startswith("def "):
                code = action
            else:
                code = wrap_strict(action) if self.strict else wrap_with_print(action)
        except PARSE_ERRORS as err:
            return f"Error executing action: {err}", False
        result = original_result((await self._python([code])).results[0])
        if functions := defined_functions(code):
            self.last_function = functions[-1]
        return str(result), not result["error"]

    async def _python(self, codes: list[str], **options: Any) -> PythonRun:
        assert self.sandbox is not None
        options.setdefault("timeout", self.timeout)
        try:
            run = await self.sandbox.python(codes, **options)
        except SandboxError as exc:  # the lease then retires the container
            self.sandbox.mark_broken(str(exc))
            raise
        self._restarted |= run.restarted and options.get("name", "main") == "main"
        return run

    # ---------------------------------------------------------------- reward

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        """Submit `argument`'s first word as the function (the last one defined when empty)."""
        assert self._check is not None
        check = self._check
        name = argument.split(" ")[0] if argument else self.last_function
        reason = self._unscorable(check, name)
        if reason or not name:
            return 0.0, {"submitted_function": name, "reward": 0.0, "reason": reason}
        run = await self._python(check.pred_codes(name))
        pred = by_test(check.tests, [original_result(r) for r in run.results[CODES_BEFORE_TESTS:]])
        gold = (await self.gold()).by_test(check.tests)
        if not self.strict:
            reward = original_reward(pred, gold)
        elif run.results[0].raised:  # the name is not defined: the original ran the tests anyway
            reward, reason = 0.0, f"the alias failed: {run.results[0].error}"
        else:
            reward = strict_reward(pred, gold)
        info = {"submitted_function": name, AGENT_OBS: pred, EVAL_OBS: gold, "reward": reward}
        return reward, info | ({"reason": reason} if reason else {})

    def breakdown(self) -> dict[str, Any] | None:
        """The function submitted, how many of the task's tests it passed and each test's result
        (passed, or the error it gave), or why it could not be scored."""
        info = self.score_info
        if "submitted_function" not in info:
            return None
        parts: dict[str, Any] = {"function": info["submitted_function"]}
        if info.get("reason"):
            parts["reason"] = str(info["reason"])[:200]
        pred, gold = info.get(AGENT_OBS) or {}, info.get(EVAL_OBS) or {}
        if not pred:
            return parts
        passed = {test: (strict_passed(r, gold[test]) if self.strict else r == gold[test]) for test, r in pred.items()}
        parts |= {"tests": len(passed), "passed": sum(passed.values())}
        for n, (test, ok) in enumerate(list(passed.items())[:MAX_TESTS_SHOWN]):
            error = str(pred[test].get("error", "")) if not ok else ""
            parts[f"test {n + 1}"] = f"{'passed' if ok else 'failed'}: {test[:100]}" + (f" ({error[:100]})" if error else "")
        return parts

    def _unscorable(self, check: MbppCheck, name: str | None) -> str:
        if not name:
            return "no function to submit"
        if not check.tests:
            return "the task has no tests"
        if check.gold_name is None:
            return "no `def name(` in the gold: the original's reward raised here"
        if self.strict and not name.isidentifier():
            return f"{name!r} is not a function name"
        return ""

    async def gold(self) -> PythonGold:
        """The gold's result per test (in the tests' order), once per image, task and mode."""
        assert self.task is not None and self._check is not None
        task, check = self.task, self._check
        key = GoldKey(await self.runtime.image_digest(task.image), task.fingerprint, self.runtime.reward_mode)

        async def compute() -> list[Result]:
            run = await self._python(check.gold_codes(), name="gold", fresh=True, close=True, timeout=GOLD_TIMEOUT)
            return [original_result(r) for r in run.results[CODES_BEFORE_TESTS:]]

        return PythonGold.of(await self.runtime.gold.get(key, compute))

    # ---------------------------------------------------------------- the harness rule

    async def harness_step(self, action: str) -> HarnessStep:
        """The harness's turn: a `def` is auto-submitted (`step_with_autosubmit`), other actions
        score 0, `submit` and `skip` end the episode."""
        stripped = action.strip()
        if not stripped.startswith("def"):
            return await super().harness_step(action)
        step = await self.step_with_autosubmit(stripped)
        return self.harness_turn(step.reward, step.observation, bool(step.info.get(ACTION_EXECUTED)))

    async def step_with_autosubmit(self, action: str) -> StepResult:
        """One turn of the paper's multi-turn harness for Python: an action starting with `def`
        runs, then is submitted under the name it defines without ending the episode, and the
        step's reward is that submission's; when it is below 1 and a test of the submission left
        an error, the observation is "Test case did not pass. Please try again.". Other actions
        are plain steps (reward 0). In original mode the interpreter then holds what the original's
        reward left in it: a fresh namespace with the set-up code, the gold and its tests run."""
        step = await self.step(action)
        match = AUTOSUBMIT.match(action) if action.startswith("def") else None
        if match is None:  # the harness raised on a `def` it couldn't name: here a plain step
            return step
        reward, info = await self._reward(match.group(1))
        self.score_info = info  # the turn's breakdown: this submission's
        if not self.strict and AGENT_OBS in info:
            assert self._check is not None
            await self._python(self._check.gold_codes(), fresh=True)
        observation = step.observation
        if reward != 1 and any(failed_test(r) for r in info.get(AGENT_OBS, {}).values()):
            observation = RETRY_MESSAGE
        self.observation = observation
        return StepResult(observation, reward, False, {**step.info, **info})


def _define_then_submit(task: Task) -> list[str]:
    match = AUTOSUBMIT.search(task.gold_text)
    return [task.gold_text, f"submit {match.group(1) if match else ''}"]


SPEC = register(KindSpec(
    name="python", environment=PythonEnv, language="PYTHON", setting="Python 3 Interpreter", fence="python",
    fence_tags=frozenset({"python", "py", "python3"}), export_name="ic_python", datasets=("mbpp",),
    starter="starter-python", gold_actions=_define_then_submit, submit_argument=" <function name>",
    submit_meaning="your function is tested", paper_parser="python", tool="python", tool_argument="code",
    tool_description="Run Python code in a persistent interpreter and return what it printed. Code that defines "
                     "a function (starting with `def name(`) is also tested against hidden test cases right away.",
    task_file=TaskFile("dockerfile", required=False, purpose="the image its tasks run in")))
