"""Harbor task folders as an environment kind (the task format of Harbor, NeMo Gym, verifiers,
OpenEnv, Repo2RLEnv; tasks/harbor.py reads them).

The agent acts in the task's container through a persistent shell, starting in its WORKDIR. An
episode is scored once, by the task's verifier, at `submit` or when the agent's time or turns run
out (the sweep then submits for it):

1. the agent's trajectory is written in Harbor's ATIF format to /logs/agent/trajectory.json;
2. tests/ is copied to /tests (never there before: the agent can't read its tests);
3. /tests/test.sh runs (as Harbor runs it: made executable, its #! line deciding) in the working
   directory, as root, with [verifier] env, under the verifier's timeout, its output kept in
   /logs/verifier/test-stdout.txt as Harbor keeps it;
4. the reward is read as Harbor reads it: /logs/verifier/reward.json when it exists (its keys;
   `reward` is the headline), else reward.txt.

A verifier that times out, can't start, writes no reward or a value outside [0, 1], or fails for
want of a network the container does not have, is a `VerifierError`: the episode is stored as a
verifier error, never as the model's 0. The oracle runs solution/solve.sh, unpacked to /solution.
The warm pool's reset takes /tests, /logs and /solution away with the rest. A task with a
healthcheck is started only once it passes, as Harbor starts it.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import re
import shlex
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from environments.base import ACTION_EXECUTED, StepResult, TaskUnavailable, VerifierError, VerifierTimedOut
from environments.kind import KindSpec, register
from environments.workspace import WorkspaceEnv, describe, json_safe
from tasks.harbor import KIND
from tasks.harbor_config import resolve

if TYPE_CHECKING:
    from tasks import Task

ACTION_TIMEOUT = 180.0  # seconds one action may run, within the agent's time (Harbor sets none)
CANNOT_START = (126, 127)  # bash's exit statuses for a script it could not run
VERIFIER_OUTPUT = 2000  # characters of the verifier's output in the submit turn's observation
REWARD_TXT, REWARD_JSON = "/logs/verifier/reward.txt", "/logs/verifier/reward.json"
ATIF_VERSION = "ATIF-v1.4"
# The verifier's run, as Harbor's: a fresh /logs/verifier (a reward file the image or the agent left
# there is not this verifier's), test.sh made executable and run as it is (its #! line decides),
# its output kept in /logs/verifier/test-stdout.txt; the tail of that output is shown.
VERIFY = ("rm -rf /logs/verifier && mkdir -p /logs/verifier && chmod +x /tests/test.sh && "
          "{ (/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1; status=$?; "
          f"tail -c {VERIFIER_OUTPUT} /logs/verifier/test-stdout.txt; exit $status; }}")
SHELL = "/usr/lib/intercode/bash"  # the image's bash, or ours when it has none (images/own)
# What a program prints when it can't reach the network: a name it could not resolve, no route.
# An extended regular expression: grep -E reads it in the container, Python in tests.
OFFLINE = re.compile(r"could not resolve|couldn't resolve|failure (in name )?resol|name or service not known|"
                     r"dns error|failed to lookup address|network is unreachable|no route to host|getaddrinfo",
                     re.IGNORECASE)


class HarborEnv(WorkspaceEnv):
    kind = KIND
    scores_every_action = False  # the verifier runs once, after the agent

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self._agent_deadline = 0.0
        self._breakdown: dict[str, Any] | None = None

    def variables(self, task: Task) -> dict[str, str]:
        return resolve(dict(task.meta.get("env") or {}))

    def start_dir(self, task: Task, image_workdir: str) -> str:
        return str(task.meta.get("workdir") or image_workdir)

    async def _start(self, task: Task) -> None:
        await super()._start(task)
        if task.meta.get("healthcheck"):
            await self._healthy(task.meta["healthcheck"])
        self._agent_deadline = time.monotonic() + float(task.meta["agent_timeout"])
        self._breakdown = None

    async def _healthy(self, check: dict[str, Any]) -> None:
        """Wait until [environment.healthcheck]'s command passes, as Docker's HEALTHCHECK does:
        failures in its start period don't count; `retries` failures in a row make the task fail."""
        assert self.sandbox is not None and self.task is not None
        start, failures = time.monotonic(), 0
        env = self.variables(self.task)
        while True:
            run = await self.sandbox.exec([SHELL, "-c", check["command"]], cwd=self.workdir,
                                          timeout=check["timeout_sec"], env=env)
            if run.exit_code == 0 and not run.timed_out:
                return
            starting = time.monotonic() - start < check["start_period_sec"]
            failures += 0 if starting else 1
            if failures >= check["retries"]:
                raise TaskUnavailable(f"task {self.task.id}: its healthcheck ({check['command']!r}) failed {failures} "
                                      f"times in a row: {_last_line(run.output)}")
            await asyncio.sleep(check["start_interval_sec"] if starting else check["interval_sec"])

    async def step(self, action: str) -> StepResult:
        """As the base's, but once the agent's time is up the next action is not run: the
        episode is submitted instead (the verifier runs), as Harbor verifies after a timeout."""
        await self.ready()
        if self.task is not None and not self.done and self._remaining() <= 0 and action.strip() != "submit":
            result = await super().step("submit")
            note = f"The agent's time ({self.task.meta['agent_timeout']:g} s) is up; the tests ran."
            return StepResult(f"{note}\n{result.observation}", result.reward, True, result.info)
        return await super().step(action)

    async def _execute(self, action: str) -> tuple[str, bool]:
        timeout = max(min(ACTION_TIMEOUT, self._remaining()), 0.1)
        result = await self.shell(action, timeout)
        return describe(result, timeout), result.ok

    def _remaining(self) -> float:
        return self._agent_deadline - time.monotonic()

    async def harness_step(self, action: str) -> tuple[float, str, bool]:
        """One turn of a multi-turn harness: an action runs unscored (the tests run once, at the
        end), `submit` (or the agent's time running out) ends the episode with the verifier's reward."""
        step = await self.step(action)
        return step.reward, step.observation, bool(step.info.get(ACTION_EXECUTED))

    def breakdown(self) -> dict[str, Any] | None:
        return self._breakdown if self.score_info else None

    # ---------------------------------------------------------------- the verifier

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.sandbox is not None and self.task is not None
        task, sandbox = self.task, self.sandbox
        folder = Path(task.meta["dir"])
        await sandbox.put("/logs/agent", _tar({"trajectory.json": json.dumps(self.trajectory(), indent=1).encode()}))
        await sandbox.put("/tests", tar_of(folder / "tests"))
        timeout = float(task.meta["verifier_timeout"])
        env = resolve({**(task.meta.get("env") or {}), **(task.meta.get("verifier_env") or {})})
        run = await sandbox.exec([SHELL, "-c", VERIFY], cwd=self.workdir, timeout=timeout, env=env)
        output = run.output[-VERIFIER_OUTPUT:]
        if run.timed_out:
            raise VerifierTimedOut(f"the verifier ran longer than its {timeout:g} s (task.toml [verifier] timeout_sec)"
                                   f"; its last line: {_last_line(output)}")
        rewards = await self._read_rewards()
        if rewards is None or rewards["reward"] < 1:
            await self._check_network()
        if rewards is None:
            if run.exit_code in CANNOT_START:
                raise VerifierError(f"tests/test.sh could not start (exit {run.exit_code}): {_last_line(output)}")
            raise VerifierError(f"tests/test.sh wrote no reward (neither {REWARD_TXT} nor {REWARD_JSON}; it exited "
                                f"{run.exit_code}): {_last_line(output)}")
        reward = rewards["reward"]
        self._breakdown = {key: json_safe(value) for key, value in rewards.items()}
        self.observation = f"Verifier: reward {reward:g} (test.sh exited {run.exit_code})\n{output}".rstrip()
        return reward, {"rewards": rewards, "verifier_exit": run.exit_code, "verifier_output": output}

    async def _check_network(self) -> None:
        """VerifierError when the verifier failed to reach a host from a container without a
        network: that is the setting's failure, not the model's 0."""
        assert self.sandbox is not None and self.task is not None
        found = await self.sandbox.exec(["grep", "-m1", "-iE", OFFLINE.pattern, "/logs/verifier/test-stdout.txt"],
                                        cwd="/", timeout=10.0)
        if found.exit_code != 0:
            return
        interfaces = await self.sandbox.exec(["ls", "/sys/class/net"], cwd="/", timeout=10.0)
        if interfaces.output.split() not in ([], ["lo"]):
            return  # it has a network: whatever failed, failed there
        line = found.output.strip()[:200]
        if self.task.meta.get("allow_internet"):
            hint = ("task.toml asks for the internet, which this run does not give: allow it (`tasks check "
                    "--allow-internet`, or `allow_internet = true` in the sweep's [[tasks]])")
        else:
            hint = "task.toml gives the task no network, yet its verifier needs one: fix the task"
        raise VerifierError(f"the verifier could not reach the network ({line}); {hint}")

    async def _read_rewards(self) -> dict[str, float] | None:
        """As Harbor (0.26) reads them: reward.json's keys when it exists (its `reward` the
        headline), else reward.txt's number; None when neither file is there. VerifierError for a
        file that is there but gives no headline, or a value that is not a reward in [0, 1]."""
        text_json = await self._read(REWARD_JSON)
        if text_json is not None:
            rewards = _numbers(text_json)
            if "reward" not in rewards:
                keys = ", ".join(rewards) or "none"
                raise VerifierError(f"{REWARD_JSON} has no numeric `reward` (its numeric keys: {keys}); Harbor reads "
                                    f"it alone when it exists, {REWARD_TXT} too")
            for key, value in rewards.items():
                _in_range(value, f"{REWARD_JSON}'s `{key}`")
            return rewards
        text_txt = await self._read(REWARD_TXT)
        return None if text_txt is None else {"reward": _number(text_txt, REWARD_TXT)}

    async def _read(self, path: str) -> str | None:
        assert self.sandbox is not None
        result = await self.sandbox.exec(["cat", path], cwd="/", timeout=10.0)
        return result.output if result.exit_code == 0 else None

    def trajectory(self) -> dict[str, Any]:
        """The episode so far in Harbor's ATIF: the instruction, then one agent step per action with
        its shell call and output (what verifiers that grade the process read)."""
        assert self.task is not None
        steps: list[dict[str, Any]] = [{"step_id": 1, "source": "user", "message": self.task.query}]
        actions = [(a, o) for a, o in self.history if a.split(maxsplit=1)[:1] != ["submit"]]
        for number, (action, observation) in enumerate(actions, 2):
            call = f"call_{number - 1}"
            steps.append({"step_id": number, "source": "agent", "message": "",
                          "tool_calls": [{"tool_call_id": call, "function_name": "shell", "arguments": {"command": action}}],
                          "observation": {"results": [{"source_call_id": call, "content": observation}]}})
        return {"schema_version": ATIF_VERSION, "session_id": f"{self.task.id}@{time.time():.0f}",
                "agent": {"name": "intercode-orchestrator", "version": "1"}, "steps": steps}


def tar_of(directory: Path) -> bytes:
    """An uncompressed tar of `directory`'s contents (paths relative to it, modes kept). Links are
    followed (tasks/harbor.py refuses a task whose links lead out of its folder)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT, dereference=True) as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    return out.getvalue()


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _numbers(text: str) -> dict[str, float]:
    """reward.json's values, each a number (true and false count as 1 and 0, as Harbor reads them);
    VerifierError names the first that is not."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VerifierError(f"{REWARD_JSON} is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise VerifierError(f"{REWARD_JSON} holds a JSON {type(parsed).__name__}, not an object")
    for key, value in parsed.items():
        if not isinstance(value, int | float):
            raise VerifierError(f"{REWARD_JSON}'s `{key}` is {json.dumps(value)[:40]}, not a number in [0, 1]")
    return {key: float(value) for key, value in parsed.items()}


def _number(text: str, path: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise VerifierError(f"{path} holds {text.strip()[:40]!r}, not a number") from None
    return _in_range(value, path)


def _in_range(value: float, where: str) -> float:
    """A reward is a number in [0, 1]: anything else is the verifier's fault, never stored."""
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise VerifierError(f"{where} is {value:g}, not a reward in [0, 1]: fix tests/test.sh")
    return value


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


SOLVE_FAILED = "[solution/solve.sh exited"


def solution_action(task: Task) -> str:
    """The oracle's action: the task's solution/ unpacked to /solution, then solve.sh made executable
    and run with [solution] env, as Harbor's oracle agent runs it."""
    packed = base64.b64encode(tar_of(Path(task.meta["dir"]) / "solution")).decode("ascii")
    variables = {"DEBIAN_FRONTEND": "noninteractive", **(task.meta.get("solution_env") or {})}
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in variables.items())
    return (f"mkdir -p /solution && echo {packed} | base64 -d | tar -xf - -C /solution && "
            f"chmod +x /solution/solve.sh && env {env} /solution/solve.sh; status=$?; "
            f"[ $status -eq 0 ] || echo \"{SOLVE_FAILED} $status]\"; (exit $status)")


def _time_limit(task: Task) -> float:
    """The agent's time, the verifier's, and a minute for the containers and the model's last answer."""
    return float(task.meta.get("agent_timeout", 600)) + float(task.meta.get("verifier_timeout", 600)) + 60.0


def _oracle(task: Task) -> list[str]:
    return [solution_action(task), "submit"] if (Path(task.meta["dir"]) / "solution").is_dir() else ["submit"]


SPEC = register(KindSpec(
    name=KIND, environment=HarborEnv, language="BASH", setting="Linux container", fence="bash",
    fence_tags=frozenset({"bash", "sh", "shell", "console"}), export_name="ic_harbor", datasets=(),
    gold_actions=_oracle, submit_meaning="the task's tests then check your work", shows_reward=False,
    paper_parser="code_or_whole", tool="shell", tool_argument="command",
    tool_description="Run a command in the container's shell (its state, such as the directory, carries over) and "
                     "return what it printed.",
    submit_at_end=True, prompts="task", time_limit=_time_limit))
