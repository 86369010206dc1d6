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

A verifier that times out, can't start, or writes no reward or a value outside [0, 1] is a
`VerifierError`; one that fails for want of a network the container does not have is a
`VerifierOffline`: the episode is stored as such, never as the model's 0. The oracle runs
solution/solve.sh, unpacked to /solution. The warm pool's reset takes /tests, /logs and /solution
away with the rest. A task with a healthcheck is started only once it passes, as Harbor starts it.

The rest of Harbor's format (0.26):
- services (environment/docker-compose.yaml) run beside the agent's container, leased with it as
  one warm group (foundation/pool/group.py); the image's ENTRYPOINT runs, as Harbor runs it;
- multi-step tasks ([[steps]]): each step's workdir/ is put in the working directory and its
  setup.sh run, then its healthcheck; the agent gets the step's instruction; `submit` runs the
  step's verifier (the task's tests/ with the step's over them), and the next step follows unless
  this one's rewards are below its `min_reward`. The episode's rewards are Harbor's: per key, the
  mean over the steps that were verified, a key a step lacks counting 0 (trial.py,
  _aggregate_step_rewards), or the last step's with `multi_step_reward_strategy = "final"`;
- artifacts are copied out after the agent, before the verifier (Harbor collects them then), and
  kept in the breakdown (their text, cut at ARTIFACT_TEXT bytes each);
- MCP servers and skills are offered to the agent (`tool_servers()`, `skills()`; a task that offers
  them says so before it is reset: `Task.offers_extras`, set by tasks/harbor.py with its time limit);
- reward.json need not have `reward`: the headline is then its one key's value, as Harbor's CLI
  reads it, or with several keys (where Harbor has no headline) their mean, so that success is
  every key at 1; every key is kept and the report shows each key's mean (Harbor's Mean metric).
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
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit, urlunsplit
from typing import TYPE_CHECKING, Any, NamedTuple

from environments.base import (ACTION_EXECUTED, HarnessStep, ScoringFailed, Skill, StepResult, TaskUnavailable,
                               ToolServer, VerifierError, VerifierOffline, VerifierTimedOut)
from environments.kind import KindSpec, register
from environments.workspace import WorkspaceEnv, describe, json_safe
from foundation.sandbox import Sandbox, TooLarge, files_tar
from foundation.timeline import span
from icdriver.users import IMAGE
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
# Harbor's housekeeping runs as root, the tests as the verifier's user (the image's USER unless
# task.toml names one); /logs' folders are open to every user, as Harbor makes them.
LOGS = "mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent /logs/verifier /logs/artifacts"
PREPARE_VERIFIER = f"rm -rf /logs/verifier && {LOGS} && chmod +x /tests/test.sh"
VERIFY = ("{ (/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1; status=$?; "
          f"tail -c {VERIFIER_OUTPUT} /logs/verifier/test-stdout.txt; exit $status; }}")
SHELL = "/usr/lib/intercode/bash"  # the image's bash, or ours when it has none (images/own)
# What a program prints when it can't reach the network: a name it could not resolve, no route.
# An extended regular expression: grep -E reads it in the container, Python in tests.
ARTIFACT_TEXT, ARTIFACTS_TEXT = 64 * 1024, 256 * 1024  # bytes of an artifact's text kept, and of all of them
ARTIFACT_MOST = 16 << 20  # bytes a source may hold to be copied out at all
HARBOR_ARTIFACTS = "/logs/artifacts"  # collected always, as Harbor does
OFFLINE = re.compile(r"could not resolve|couldn't resolve|failure (in name )?resol|name or service not known|"
                     r"dns error|failed to lookup address|network is unreachable|no route to host|getaddrinfo",
                     re.IGNORECASE)


class HarborEnv(WorkspaceEnv):
    kind = KIND
    scores_every_action = False  # the verifier runs once, after the agent

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self._agent_deadline, self._agent_time = 0.0, 0.0  # when the agent's time (for this step) ends, and how long
        self._breakdown: dict[str, Any] | None = None
        self._step = 0  # the step the agent is on (multi-step tasks)
        self._verified: list[dict[str, Any]] = []  # each verified step's rewards and verifier exit
        self._artifacts: list[dict[str, Any]] = []
        self._servers: list[ToolServer] = []
        self._skills: list[Skill] = []

    def variables(self, task: Task) -> dict[str, str]:
        return resolve(dict(task.meta.get("env") or {}), task.meta.get("host_env") or ())

    def start_dir(self, task: Task, image_workdir: str) -> str:
        return str(task.meta.get("workdir") or image_workdir)

    def agent_user(self) -> str:
        """The agent's user, as Harbor's: the step's [agent] user, else the task's, else the image's USER."""
        return self._user("agent_user")

    def _user(self, key: str) -> str:
        assert self.task is not None
        steps = _steps(self.task)
        step = steps[self._step] if steps and self._step < len(steps) else {}
        return str(step.get(key) or self.task.meta.get(key) or IMAGE)

    async def _start(self, task: Task) -> None:
        await super()._start(task)
        self._breakdown, self._step, self._verified, self._artifacts = None, 0, [], []
        assert self.sandbox is not None
        logs = await self.sandbox.exec([SHELL, "-c", LOGS], cwd="/", timeout=30.0)
        if logs.exit_code != 0:
            raise TaskUnavailable(f"task {task.id}: /logs could not be made: {_last_line(logs.output)}")
        if task.meta.get("healthcheck"):
            await self._healthy(task.meta["healthcheck"])
        self._servers = await self._tool_servers(task)
        self._skills = await self._read_skills(task)
        if _steps(task):
            await self._begin_step()
        else:
            self._agent_time = float(task.meta["agent_timeout"])
            self._agent_deadline = time.monotonic() + self._agent_time

    def tool_servers(self) -> list[ToolServer]:
        return list(self._servers)

    def skills(self) -> list[Skill]:
        return list(self._skills)

    async def _tool_servers(self, task: Task) -> list[ToolServer]:
        """The task's MCP servers, each URL's host (a service's name) put as its address on the
        episode's network, where this process reaches it."""
        servers = task.meta.get("mcp_servers") or []
        if not servers:
            return []
        assert self.sandbox is not None
        addresses = await self.sandbox.services()
        found = []
        for server in servers:
            parts = urlsplit(server["url"])
            here = server["url"]
            if parts.hostname in addresses:
                port = f":{parts.port}" if parts.port else ""
                here = urlunsplit(parts._replace(netloc=f"{addresses[parts.hostname]}{port}"))
            found.append(ToolServer(server["name"], server["transport"], here, server["url"]))
        return found

    async def _read_skills(self, task: Task) -> list[Skill]:
        """The skills under `skills_dir` (a folder each, with SKILL.md), as their front matter names
        and describes them."""
        folder = task.meta.get("skills_dir")
        if not folder:
            return []
        assert self.sandbox is not None
        listing = await self.sandbox.exec(
            [SHELL, "-c", 'for f in "$1"/*/SKILL.md; do [ -f "$f" ] && printf "@@skill %s\n" "$f" && head -c 4000 "$f" '
                          '&& echo; done; true', "skills", folder], cwd="/", timeout=30.0)
        skills = []
        for block in listing.output.split("@@skill ")[1:]:
            path, _, text = block.partition("\n")
            fields = _front_matter(text)
            name = fields.get("name") or PurePosixPath(path).parent.name
            skills.append(Skill(name, fields.get("description", ""), str(PurePosixPath(path).parent)))
        return skills

    async def _begin_step(self) -> None:
        """A step's start: its workdir/ put in the working directory, its setup.sh run there, its
        healthcheck passed; then the agent's time for it begins."""
        assert self.sandbox is not None and self.task is not None
        step = _steps(self.task)[self._step]
        folder = Path(self.task.meta["dir"]) / "steps" / step["name"]
        if (folder / "workdir").is_dir():
            await self.sandbox.put(self.workdir, tar_of(folder / "workdir"))
            if (folder / "workdir" / "setup.sh").is_file():
                env = self.variables(self.task)
                run = await self.sandbox.exec([SHELL, f"{self.workdir.rstrip('/')}/setup.sh"], cwd=self.workdir,
                                              timeout=float(self.task.meta["build_timeout"]), env=env,
                                              user=self.agent_user())
                if run.exit_code != 0 or run.timed_out:
                    raise TaskUnavailable(f"task {self.task.id}: steps/{step['name']}/workdir/setup.sh "
                                          f"{'timed out' if run.timed_out else f'exited {run.exit_code}'}: "
                                          f"{_last_line(run.output)}")
        if step.get("healthcheck"):
            await self._healthy(step["healthcheck"])
        self._agent_time = float(step["agent_timeout"] or self.task.meta["agent_timeout"])
        self._agent_deadline = time.monotonic() + self._agent_time

    async def _healthy(self, check: dict[str, Any]) -> None:
        """Wait until [environment.healthcheck]'s command passes, as Docker's HEALTHCHECK does:
        failures in its start period don't count; `retries` failures in a row make the task fail."""
        assert self.sandbox is not None and self.task is not None
        start, failures = time.monotonic(), 0
        env = self.variables(self.task)
        while True:
            run = await self.sandbox.exec([SHELL, "-c", check["command"]], cwd=self.workdir,
                                          timeout=check["timeout_sec"], env=env, user=self.agent_user())
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
            result = await super().step("submit")  # a multi-step task goes on to its next step
            note = f"The agent's time ({self._agent_time:g} s) is up; the tests ran."
            return StepResult(f"{note}\n{result.observation}", result.reward, result.done, result.info)
        return await super().step(action)

    async def _execute(self, action: str) -> tuple[str, bool]:
        timeout = max(min(ACTION_TIMEOUT, self._remaining()), 0.1)
        if action.startswith(UNPACK_SOLUTION) and (parts := self._solution(action)) is not None:
            # the oracle's, as Harbor's oracle runs it: solution/ put in /solution by root, solve.sh
            # run by the agent's user
            assert self.sandbox is not None
            unpacked = await self.sandbox.exec([SHELL, "-c", parts[0]], cwd="/", timeout=timeout)
            if not unpacked.ok:
                return describe(unpacked, timeout), False
            action = parts[1]
        result = await self.shell(action, timeout)
        return describe(result, timeout), result.ok

    def _solution(self, action: str) -> tuple[str, str] | None:
        """The two parts of `action` when it is one of the task's oracle actions (solution_action)."""
        assert self.task is not None
        folder = Path(self.task.meta["dir"])
        for where in [folder / "steps" / s["name"] for s in _steps(self.task)] or [folder]:
            if (where / "solution").is_dir() and action == solution_action(self.task, where):
                return solution_parts(self.task, where)
        return None

    def _remaining(self) -> float:
        return self._agent_deadline - time.monotonic()

    async def harness_step(self, action: str) -> HarnessStep:
        """One turn of a multi-turn harness: an action runs unscored (the tests run once, at the
        end), `submit` (or the agent's time running out) ends the episode with the verifier's reward."""
        step = await self.step(action)
        return self.harness_turn(step.reward, step.observation, bool(step.info.get(ACTION_EXECUTED)))

    def breakdown(self) -> dict[str, Any] | None:
        return self._breakdown if self.score_info else None

    # ---------------------------------------------------------------- the verifier

    async def _submit(self, argument: str) -> StepResult:
        """A step's `submit` (multi-step tasks): its verifier runs; the next step begins (its
        instruction the observation) unless this was the last, or below its `min_reward`."""
        assert self.task is not None
        steps = _steps(self.task)
        if not steps or self._step == len(steps) - 1:
            return await super()._submit(argument)
        self.history.append((f"submit {argument}".strip(), self.observation or ""))
        try:
            with span("reward"):
                rewards, _ = await self._verify_step()
            if not _below(rewards, steps[self._step].get("min_reward")):
                self._step += 1
                await self._begin_step()
                return self._next_step(rewards)
            reward, info = self._ended(stopped=True)
        except (ScoringFailed, TaskUnavailable) as exc:
            failure = exc if isinstance(exc, ScoringFailed) else VerifierError(str(exc))
            return self._unscored(failure)
        self.done, self.reward, self.score_info = True, reward, info
        info[ACTION_EXECUTED] = True
        return StepResult(self.observation or "", reward, True, info)

    def _next_step(self, rewards: dict[str, float]) -> StepResult:
        """The step after a verified one. Run a step a run (`step_runs`, as Harbor runs them: play
        in agents/episode.py), the run ends here, and the next begins with the step's instruction
        (`pending_step`); else the instruction is the observation and the run goes on."""
        assert self.task is not None
        steps = _steps(self.task)
        step = steps[self._step]
        done = steps[self._step - 1]["name"]
        self.score_info = {"step": done, "step_rewards": rewards}
        self._breakdown = {**rewards, "step": done}
        if self.task.meta.get("step_runs"):
            self.observation = f"Step {done} is checked: reward {_headline(rewards):g}."
            self.done, self.pending_step = True, self._step
            return StepResult(self.observation, 0.0, True, {ACTION_EXECUTED: True, **self.score_info})
        self.observation = (f"Step {done} is checked: reward {_headline(rewards):g}.\n\nStep {self._step + 1} of "
                            f"{len(steps)} ({step['name']}):\n{step['instruction']}")
        return StepResult(self.observation, 0.0, False, {ACTION_EXECUTED: True, **self.score_info})

    async def reset(self, task: Task, *, multi_turn: bool = False) -> str:
        """As every kind's; but the next step's run of a multi-step task (its task's `step_index`,
        the step this episode is waiting at) goes on in the same container, where the last ended."""
        if self.task is not None and self.pending_step is not None and task.meta.get("step_index") == self.pending_step:
            self.done, self.pending_step, self.multi_turn = False, None, multi_turn
            self.observation = task.query
            return task.query
        return await super().reset(task, multi_turn=multi_turn)

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.task is not None
        if not _steps(self.task):
            rewards, run = await self._verify(self._tests(), float(self.task.meta["verifier_timeout"]),
                                              self.task.meta.get("verifier_env") or {}, self.task.meta.get("artifacts") or [])
            reward = _headline(rewards)
            self._breakdown = {**{k: json_safe(v) for k, v in rewards.items()}, **self._kept_artifacts()}
            self.observation = f"Verifier: reward {reward:g} (test.sh exited {run.exit_code})\n{run.output}".rstrip()
            return reward, {"rewards": rewards, "verifier_exit": run.exit_code, "verifier_output": run.output}
        await self._verify_step()
        return self._ended(stopped=False)

    async def _verify_step(self) -> tuple[dict[str, float], VerifierRun]:
        """The current step's verifier: the task's tests/ with the step's over them, the step's env
        and time; its rewards kept with the step's name."""
        assert self.task is not None
        step = _steps(self.task)[self._step]
        rewards, run = await self._verify(self._tests(step["name"]), float(step["verifier_timeout"]),
                                          {**(self.task.meta.get("verifier_env") or {}), **step["verifier_env"]},
                                          [*(self.task.meta.get("artifacts") or []), *step["artifacts"]], step["name"])
        self._verified.append({"name": step["name"], **rewards, "verifier_exit": run.exit_code})
        self.observation = (f"Verifier of step {step['name']}: reward {_headline(rewards):g} (test.sh exited "
                            f"{run.exit_code})\n{run.output}").rstrip()
        return rewards, run

    def _ended(self, *, stopped: bool) -> tuple[float, dict[str, Any]]:
        """The episode's rewards from its verified steps, by the task's strategy (Harbor's)."""
        assert self.task is not None
        steps = [{k: v for k, v in s.items() if k not in ("name", "verifier_exit")} for s in self._verified]
        if self.task.meta.get("reward_strategy") == "final":
            rewards = steps[-1]
        else:
            keys = sorted({key for found in steps for key in found})
            rewards = {key: sum(found.get(key, 0.0) for found in steps) / len(steps) for key in keys}
        reward = _headline(rewards)
        stopped_at = self._verified[-1]["name"] if stopped else None
        self._breakdown = {**rewards, "steps": [{**s, "stopped": s["name"] == stopped_at} for s in self._verified],
                           **self._kept_artifacts()}
        if stopped:
            self.observation = (f"{self.observation}\nStep {stopped_at} is below its min_reward: the task ends here "
                                f"(reward {reward:g}).")
        return reward, {"rewards": rewards, "steps": self._verified, "stopped_at": stopped_at}

    def _tests(self, step: str | None = None) -> list[Path]:
        """The folders whose files make /tests: the task's tests/, then the step's over them."""
        assert self.task is not None
        folder = Path(self.task.meta["dir"])
        found = [folder / "tests"] + ([folder / "steps" / step / "tests"] if step else [])
        return [f for f in found if f.is_dir()]

    async def _verify(self, tests: list[Path], timeout: float, verifier_env: dict[str, str],
                      artifacts: list[dict[str, Any]], step: str | None = None) -> tuple[dict[str, float], VerifierRun]:
        assert self.sandbox is not None and self.task is not None
        carried = await self._collect(artifacts, step)
        trajectory = files_tar({"trajectory.json": json.dumps(self.trajectory(), indent=1).encode()})
        env = resolve({**(self.task.meta.get("env") or {}), **verifier_env}, self.task.meta.get("host_env") or ())
        image = self.task.meta.get("verifier_image")
        if not image:  # shared: in the agent's container
            await self.sandbox.put("/logs/agent", trajectory)
            return await self._run_verifier(self.sandbox, tests, timeout, env, self.workdir)
        # Harbor's separate verifier: a fresh container of its own image, which gets the artifacts the
        # agent's left (at their paths) and its trajectory, nothing else of it; the tests are its
        # image's unless it is the task's own image
        async with self.runtime.pool.lease(image) as verifier:
            for path, data in carried.items():
                where = PurePosixPath(path)
                await verifier.put(str(where.parent), files_tar({where.name: data}))
            await verifier.put("/logs/agent", trajectory)
            workdir = self.task.meta.get("verifier_workdir") or await self.runtime.image_workdir(image)
            variables = {**env, **resolve(dict(self.task.meta.get("verifier_environment_env") or {}),
                                          self.task.meta.get("host_env") or ())}
            own_tests = bool(self.task.meta.get("verifier_docker_image") or self.task.meta.get("verifier_context"))
            return await self._run_verifier(verifier, [] if own_tests else tests, timeout, variables, workdir)

    async def _run_verifier(self, sandbox: Sandbox, tests: list[Path], timeout: float, env: dict[str, str],
                            workdir: str) -> tuple[dict[str, float], VerifierRun]:
        """tests/test.sh run in `sandbox` as Harbor runs it, its rewards read there. `tests`: the
        folders put in /tests first (none: the image's own /tests)."""
        if tests:
            await sandbox.exec(["rm", "-rf", "/tests"], cwd="/", timeout=30.0)
            for folder in tests:
                await sandbox.put("/tests", tar_of(folder))
        prepared = await sandbox.exec([SHELL, "-c", PREPARE_VERIFIER], cwd="/", timeout=30.0)
        if prepared.exit_code != 0:
            raise VerifierError(f"the verifier could not be prepared: {_last_line(prepared.output)}")
        run = await sandbox.exec([SHELL, "-c", VERIFY], cwd=workdir, timeout=timeout, env=env,
                                 user=self._user("verifier_user"))
        output = run.output[-VERIFIER_OUTPUT:]
        if run.timed_out:
            raise VerifierTimedOut(f"the verifier ran longer than its {timeout:g} s (task.toml [verifier] timeout_sec)"
                                   f"; its last line: {_last_line(output)}")
        rewards = await self._read_rewards(sandbox)
        if rewards is None or _headline(rewards) < 1:
            await self._check_network(sandbox)
        if rewards is None:
            if run.exit_code in CANNOT_START:
                raise VerifierError(f"tests/test.sh could not start (exit {run.exit_code}): {_last_line(output)}")
            raise VerifierError(f"tests/test.sh wrote no reward (neither {REWARD_TXT} nor {REWARD_JSON}; it exited "
                                f"{run.exit_code}): {_last_line(output)}")
        return rewards, VerifierRun(run.exit_code, output)

    # ---------------------------------------------------------------- artifacts

    async def _collect(self, artifacts: list[dict[str, Any]], step: str | None) -> dict[str, bytes]:
        """Copy the artifacts out (Harbor's /logs/artifacts always): each file's text kept, cut at
        ARTIFACT_TEXT bytes, ARTIFACTS_TEXT in all; a binary file by its size only. Every file
        copied, by its path in the container (what a separate verifier is given)."""
        assert self.sandbox is not None
        carried: dict[str, bytes] = {}
        sources = [*artifacts, {"source": HARBOR_ARTIFACTS, "destination": None, "exclude": []}]
        for artifact in sources:
            source = str(PurePosixPath(self.workdir) / artifact["source"])  # an absolute source stays as it is
            try:  # counted on our side as it streams: nothing in the container can make us read more
                files = await self.sandbox.get(source, most=ARTIFACT_MOST)
            except TooLarge as too:
                self._artifacts.append({"path": source, "step": step, "size": too.seen, "text": None,
                                        "truncated": True, "note": f"larger than {ARTIFACT_MOST >> 20} MB: not copied"})
                continue
            for name, data in sorted(files.items()):
                if any(fnmatch(name, pattern) or fnmatch(PurePosixPath(name).name, pattern)
                       for pattern in artifact["exclude"]):
                    continue
                path = source if len(files) == 1 and PurePosixPath(source).name == name else f"{source}/{name}"
                self._artifacts.append(self._artifact(path, step, data))
                carried[path] = data
        return carried

    def _artifact(self, path: str, step: str | None, data: bytes) -> dict[str, Any]:
        room = ARTIFACTS_TEXT - sum(len(a["text"] or "") for a in self._artifacts)
        try:
            text: str | None = data[:max(min(ARTIFACT_TEXT, room), 0)].decode("utf-8")
        except UnicodeDecodeError:
            text = None
        kept = len(text.encode()) if text is not None else 0
        return {"path": path, "step": step, "size": len(data), "text": text, "truncated": kept < len(data)}

    def _kept_artifacts(self) -> dict[str, Any]:
        return {"artifacts": list(self._artifacts)} if self._artifacts else {}

    async def _check_network(self, sandbox: Sandbox) -> None:
        """VerifierOffline when the verifier failed to reach a host from a container that was not
        given the internet (no network, or a group's own with no route out): the setting's
        failure, not the model's 0."""
        assert self.task is not None
        found = await sandbox.exec(["grep", "-m1", "-iE", OFFLINE.pattern, "/logs/verifier/test-stdout.txt"],
                                   cwd="/", timeout=10.0)
        if found.exit_code != 0:
            return
        if self.task.meta.get("internet"):
            return  # it had the internet: whatever failed, failed there
        line = found.output.strip()[:200]
        if self.task.meta.get("allow_internet"):
            hint = ("task.toml asks for the internet, which this run does not give: allow_internet = true in the "
                    "sweep's [[tasks]] (`tasks check --allow-internet`) gives it")
        else:
            hint = "task.toml gives the task no network, yet its verifier needs one: fix the task"
        raise VerifierOffline(f"the verifier tried to reach the internet ({line}); {hint}")

    async def _read_rewards(self, sandbox: Sandbox) -> dict[str, float] | None:
        """As Harbor (0.26) reads them: reward.json's keys when it exists, else reward.txt's number
        as `reward`; None when neither file is there. VerifierError for a file that is there but
        holds no reward, or a value that is not a reward in [0, 1]."""
        text_json = await _read(sandbox, REWARD_JSON)
        if text_json is not None:
            rewards = _numbers(text_json)
            if not rewards:
                raise VerifierError(f"{REWARD_JSON} has no reward at all (an empty object)")
            for key, value in rewards.items():
                _in_range(value, f"{REWARD_JSON}'s `{key}`")
            return rewards
        text_txt = await _read(sandbox, REWARD_TXT)
        return None if text_txt is None else {"reward": _number(text_txt, REWARD_TXT)}

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


class VerifierRun(NamedTuple):
    """What the verifier's run left: its exit status and the tail of its output."""

    exit_code: int
    output: str


async def _read(sandbox: Sandbox, path: str) -> str | None:
    result = await sandbox.exec(["cat", path], cwd="/", timeout=10.0)
    return result.output if result.exit_code == 0 else None


def _steps(task: Task) -> list[dict[str, Any]]:
    return list(task.meta.get("steps") or [])


def _headline(rewards: dict[str, float]) -> float:
    """The episode's reward from reward.json's keys: `reward` when there is one; else the one key's
    value (as Harbor 0.26's CLI and uploader read a trial's reward: harbor/cli/jobs.py, and
    harbor/upload/uploader.py); else, where Harbor has no headline, the keys' mean (so that
    success, a reward of 1, is every key at 1). Each key's mean over a cell is Harbor's Mean metric
    (harbor/metrics/base.py): the report's."""
    if "reward" in rewards:
        return rewards["reward"]
    return sum(rewards.values()) / len(rewards)


def _below(rewards: dict[str, float], least: dict[str, float] | None) -> bool:
    """Whether a step's rewards miss its min_reward (a key it lacks counts as missing it)."""
    return least is not None and any(rewards.get(key, -math.inf) < value for key, value in least.items())


def _front_matter(text: str) -> dict[str, str]:
    """A SKILL.md's front matter (`name:` and `description:` between --- lines), plainly read."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    fields = {}
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("name", "description"):
            fields[key.strip()] = value.strip().strip("'\"")
    return fields


def tar_of(directory: Path) -> bytes:
    """An uncompressed tar of `directory`'s contents (paths relative to it, modes kept). Links are
    followed (tasks/harbor.py refuses a task whose links lead out of its folder)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT, dereference=True) as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
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


def solution_action(task: Task, where: Path | None = None) -> str:
    """The oracle's action: the task's (or a step's, at `where`) solution/ unpacked to /solution,
    then solve.sh made executable and run with [solution] env, as Harbor's oracle agent runs it."""
    unpack, run = solution_parts(task, where)
    return f"{unpack} && {run}"


# Put over what is there, as Harbor's upload does (and with no `rm -rf`, which Codex CLI refuses to
# run whatever its approval settings; busybox images have no `find -delete`)
UNPACK_SOLUTION = "mkdir -p /solution && echo "


def solution_parts(task: Task, where: Path | None = None) -> tuple[str, str]:
    """The oracle's action in its two parts: solution/ unpacked (Harbor does it as root), and
    solve.sh run (as the agent's user)."""
    packed = base64.b64encode(tar_of((where or Path(task.meta["dir"])) / "solution")).decode("ascii")
    variables = {"DEBIAN_FRONTEND": "noninteractive", **(task.meta.get("solution_env") or {})}
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in variables.items())
    return (f"{UNPACK_SOLUTION}{packed} | base64 -d | tar -xf - -C /solution && chmod -R a+r /solution && "
            "chmod +x /solution/solve.sh",
            f"env {env} /solution/solve.sh; status=$?; [ $status -eq 0 ] || echo \"{SOLVE_FAILED} $status]\"; "
            "(exit $status)")


def _oracle(task: Task) -> list[str]:
    """solve.sh then `submit`: the task's, or each step's in turn (one step's, in its own run)."""
    folder = Path(task.meta["dir"])
    actions = []
    steps = _steps(task)
    if task.meta.get("step_index") is not None:
        steps = steps[int(task.meta["step_index"]):][:1]
    for where in [folder / "steps" / s["name"] for s in steps] or [folder]:
        actions += [solution_action(task, where), "submit"] if (where / "solution").is_dir() else ["submit"]
    return actions


SPEC = register(KindSpec(
    name=KIND, environment=HarborEnv, language="BASH", setting="Linux container", fence="bash",
    fence_tags=frozenset({"bash", "sh", "shell", "console"}), export_name="ic_harbor", datasets=(),
    gold_actions=_oracle, submit_meaning="the task's tests then check your work", shows_reward=False,
    paper_parser="code_or_whole", tool="shell", tool_argument="command",
    tool_description="Run a command in the container's shell (its state, such as the directory, carries over) and "
                     "return what it printed.",
    submit_at_end=True, prompts="task"))
