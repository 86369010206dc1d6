"""The Bash environment (NL2Bash file systems and test_queries), faithful to the original.

Actions run the original's way: `shlex.split(f'{shell} -c "{action}"')` (docker-py's split of the
original's command string, so a double-quoted part of an action loses its quotes, as it did), in
the tracked working directory, with a leading `cd` resolved textually. A timed-out action reads
"Command timed out" and an unsplittable one "Malformed command", as in the original; unlike the
original, the timed-out command is killed.

The gold command runs once per task and image in a pristine container of the same image; its
output, `git status` and the hashes of what it changed are cached for every later episode. A gold
whose result depends on the clock or the live system (`date`, `df`, `find -mmin`, ...) is cached
for a minute only, never across runs; each episode keeps the gold it started with.
"""

from __future__ import annotations

import re
import shlex
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from environments.base import Environment
from environments.file_ages import FileAges, age_files
from environments.gold import GoldKey
from environments.kind import KindSpec, TaskFile, register
from environments.rewards.bash import (
    bash_reward,
    content_paths,
    hash_command,
    parse_porcelain,
    parse_status,
    recorded_split,
)
from foundation.pool import ExecResult, Sandbox
from foundation.sandbox import simplify_path
from tasks import Task

ACTION_TIMEOUT = 10.0
GOLD_TIMEOUT = 60.0
SHELLS = {"test-queries": "/bin/sh"}  # the original's plain Bash image ran actions with sh
STATUS = {False: ["git", "status", "--short"], True: ["git", "status", "--porcelain", "-z", "-uall"]}
# Golds whose result changes with time: the clock, file ages relative to now, disk usage, users,
# processes and load. Found by command name (at the start of a command) or by find's age tests.
VOLATILE = re.compile(r"(?:^|[|;&(`]|\$\()\s*(?:date|df|cal|uptime|ps|top|free|who|w|last|vmstat)\b"
                      r"|\s-(?:[acm]min|[acm]time|daystart)\b|/proc/")
VOLATILE_TTL = 60.0


# A command that reaches another host by name or address: its output depends on the network (DNS,
# the remote's answer, the transfer's timing), which containers here do not have. `ping` of the
# loopback alone stays local.
NETWORK = re.compile(r"(?:^|[|;&(`]|\$\()\s*(?:curl|wget|dig|nslookup|host|ssh|scp|sftp|ftp|telnet|nc|rsync|"
                     r"ping(?!\s+(?:-\S+\s+\S+\s+)*(?:localhost|127\.[\d.]+)\b))\b")


def reaches_network(task: Task) -> bool:
    """Whether the task's gold reaches the network: offline it fails where the recordings' golds,
    made with the network, answered (`replay` leaves such episodes out of its comparison)."""
    return NETWORK.search(task.gold_text) is not None


def volatile(gold: str) -> bool:
    """Whether a gold's output or effect depends on when it runs (then it is cached briefly)."""
    return VOLATILE.search(gold) is not None


def split_action(shell: str, action: str) -> list[str]:
    """What docker-py made of the original's `f'{shell} -c "{action}"'`: a shlex split."""
    return shlex.split(f'{shell} -c "{action.strip()}"')


# docker's exec (the original's `exec_run`) answered when the command's output stream closed, or
# 2 s after the command itself exited, whichever came first (measured on the engine: a background
# job that prints 1.9 s after the shell exited is in the output, one at 2.5 s is not, and
# `sleep 30 &` returns after 2 s). So what a background job (`cmd &`) prints and makes in those 2 s
# counts, for an action and for a gold: the driver lingers so long on the output after the shell
# exits, within the action's timeout, and the exit status stays the shell's.
DOCKER_EXEC_LINGER = 2.0


Change = tuple[str, str]  # (path, git status code)


@dataclass(frozen=True)
class BashGold:
    """What the gold command did, per reward mode ("original", "strict"): its output, the changes
    `git status` shows, and the content hash of each changed path."""

    output: str
    changes: dict[str, list[Change]]
    hashes: dict[str, dict[str, str]]

    @classmethod
    def of(cls, value: BashGold | dict[str, Any]) -> BashGold:
        """From the gold cache's JSON form (a saved cache gives lists for the pairs)."""
        if isinstance(value, BashGold):
            return value
        changes = {mode: [(path, code) for path, code in pairs] for mode, pairs in value["changes"].items()}
        return cls(value["output"], changes, {mode: dict(h) for mode, h in value["hashes"].items()})


class BashEnv(Environment):
    kind = "bash"
    gold_before_lease = True  # the reward compares with the gold's run

    def __init__(self, runtime: Any) -> None:
        super().__init__(runtime)
        self.sandbox: Sandbox | None = None
        self._stack: AsyncExitStack | None = None
        self.workdir = "/"
        self._gold: BashGold | None = None

    @property
    def strict(self) -> bool:
        return self.runtime.reward_mode == "strict"

    def shell(self, task: Task) -> str:
        return SHELLS.get(task.dataset, "/bin/bash")

    def start_dir(self, task: Task) -> str:
        return "/"

    async def _start(self, task: Task) -> None:
        self.image_workdir = await self.runtime.image_workdir(task.image)
        if self.gold_before_lease:
            # Before our own lease: an episode never holds one container while waiting for another,
            # so a pool of any size can't deadlock on gold runs. Kept for the whole episode.
            self._gold = await self.gold()
        self._stack = AsyncExitStack()
        self.sandbox = await self._stack.enter_async_context(self.runtime.pool.lease(task.image))
        await age_files(self.sandbox, task)
        self.workdir = self.start_dir(task)

    async def _stop(self) -> None:
        self._gold = None
        stack, self._stack, self.sandbox = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def _execute(self, action: str) -> tuple[str, bool]:
        assert self.sandbox is not None and self.task is not None
        action = action.strip()
        is_cd = action.startswith("cd")
        if is_cd:
            new_dir = simplify_path(self.workdir, action[action.find("cd ") + 3:].strip() if "cd " in action else "")
            action = f"cd {new_dir}"
        try:
            argv = split_action(self.shell(self.task), action)
        except ValueError:
            return "Malformed command", False
        if any("\0" in arg for arg in argv):  # no process can take it as an argument
            return "Malformed command", False
        result = await self.sandbox.exec(argv, cwd="/" if is_cd else self.workdir, timeout=ACTION_TIMEOUT,
                                         linger=DOCKER_EXEC_LINGER)
        if result.timed_out:
            return "Command timed out", False
        if not result.valid_utf8 and not self.strict:
            return "Malformed command", False  # the original's strict decode raised into its bare except
        if is_cd and result.exit_code == 0:
            self.workdir = new_dir
        return result.output, result.exit_code == 0

    # ---------------------------------------------------------------- reward

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        assert self.sandbox is not None and self.task is not None
        gold, mode = await self.scoring_gold(), self.mode
        agent_changes = await self.changes(self.sandbox, self.strict)
        gold_changes = [(path, code) for path, code in gold.changes[mode]]
        hashes = {path: (await self.hash(self.sandbox, path, self.strict), gold.hashes[mode].get(path, ""))
                  for path, _ in content_paths(agent_changes, gold_changes, self.strict)}
        score = bash_reward(agent_changes, gold_changes, hashes, self.observation or "", gold.output, self.strict)
        info = {"file_diff": score.file_diff, "file_changes": score.file_changes,
                "answer_similarity": score.answer_similarity, "diff_miss": score.missing, "diff_extra": score.extra,
                "agent_obs": self.observation, "eval_obs": gold.output}
        return score.reward, info

    def breakdown(self) -> dict[str, Any] | None:
        """The reward's three terms (0.01 + file changes + file contents + output, each up to 0.33),
        and the changes the agent missed or made besides the gold's (a few of each, with counts)."""
        info = self.score_info
        if "file_diff" not in info:
            return None
        missing, extra = info.get("diff_miss") or [], info.get("diff_extra") or []
        return {"file_changes": info["file_diff"], "file_contents": info["file_changes"],
                "output_similarity": info["answer_similarity"], "constant": 0.01,
                "changes_missing": len(missing), "changes_extra": len(extra),
                **({"missing": _changes_text(missing)} if missing else {}),
                **({"extra": _changes_text(extra)} if extra else {})}

    @property
    def mode(self) -> str:
        return "strict" if self.strict else "original"

    async def changes(self, sandbox: Sandbox, strict: bool) -> list[tuple[str, str]]:
        """What differs from the image's commit, from the image's workdir as the original ran it."""
        result = await sandbox.exec(STATUS[strict], cwd=self.image_workdir, timeout=GOLD_TIMEOUT)
        return parse_porcelain(result.output) if strict else parse_status(result.output)

    async def hash(self, sandbox: Sandbox, path: str, strict: bool) -> str:
        result: ExecResult = await sandbox.exec(hash_command(path, strict), cwd=self.image_workdir,
                                                timeout=GOLD_TIMEOUT)
        return result.output

    async def scoring_gold(self) -> BashGold:
        """The gold this episode is scored against: the one it started with."""
        if self._gold is None:
            self._gold = await self.gold()
        return self._gold

    async def gold(self) -> BashGold:
        """Output, changes and content hashes of the gold command, once per task and image (for a
        minute only, when the gold depends on the time)."""
        assert self.task is not None
        task = self.task
        if volatile(task.gold_text) or FileAges.of(task) is not None:  # a replay's ages hold for its run only
            key = GoldKey(await self.runtime.image_digest(task.image), task.fingerprint, "bash-gold-live-v2")
            return BashGold.of(await self.runtime.gold.get(key, lambda: self._run_gold(task), ttl=VOLATILE_TTL))
        key = GoldKey(await self.runtime.image_digest(task.image), task.fingerprint, "bash-gold-v2")
        return BashGold.of(await self.runtime.gold.get(key, lambda: self._run_gold(task)))

    async def _run_gold(self, task: Task) -> dict[str, Any]:
        """Run the gold in a pristine container of the task's image; record both modes' views
        (as JSON, the gold cache's form: BashGold.of reads it)."""
        async with self.runtime.pool.lease(task.image) as sandbox:
            await age_files(sandbox, task)
            try:
                argv = split_action(self.shell(task), task.gold_text)
                output = (await sandbox.exec(argv, cwd=self.image_workdir, timeout=GOLD_TIMEOUT,
                                             linger=DOCKER_EXEC_LINGER)).output
            except ValueError:  # the original's gold failed to split the same way: no output
                output = ""
            value: dict[str, Any] = {"output": output, "changes": {}, "hashes": {}}
            for strict, mode in ((False, "original"), (True, "strict")):
                changes = await self.changes(sandbox, strict)
                value["changes"][mode] = changes
                value["hashes"][mode] = {path: await self.hash(sandbox, path, strict) for path, _ in changes}
        return value


SHELL_TAGS = frozenset({"bash", "sh", "shell", "console"})

SPEC = register(KindSpec(
    name="bash", environment=BashEnv, language="BASH", setting="Bourne Shell", fence="bash", fence_tags=SHELL_TAGS,
    export_name="ic_bash", datasets=("nl2bash-fs1", "nl2bash-fs2", "nl2bash-fs3", "nl2bash-fs4"),
    starter="starter-bash", paper_parser="bash", harness_history=True, recorded_parts=recorded_split,
    reaches_network=reaches_network, tool="bash", tool_argument="command",
    tool_description="Run a command in the Bash shell and return what it printed.",
    task_file=TaskFile("dockerfile", required=True, purpose="the file system its tasks run on", commit_root=True)))


def _changes_text(changes: list[tuple[str, str]], shown: int = 5) -> str:
    """A few changes as `git status` shows them, and how many more there are."""
    text = ", ".join(f"{code} {path}" for path, code in changes[:shown])
    return text + (f" and {len(changes) - shown} more" if len(changes) > shown else "")
