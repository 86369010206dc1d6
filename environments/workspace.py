"""An episode in a leased container of the task's own image, acting through one persistent shell:
what Harbor tasks and the shell environments of your own (environments/own.py) share.

The shell's state lives across actions (`cd`, variables, background jobs), as in a terminal. It
starts in the task's working directory (the image's WORKDIR unless the task names one) with the
task's environment variables exported. An action that runs past its time is stopped with its
process group; the shell is then started afresh where the last one was.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from environments.base import Environment
from foundation.pool import ExecResult, Sandbox

if TYPE_CHECKING:
    from environments.runtime import Runtime
    from tasks import Task

ACTION_TIMEOUT = 10.0
OUTPUT_CAP = 64 * 1024


class LeasedEnv(Environment):
    """An episode that holds a container of its task's image (a Sandbox) for its length."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.sandbox: Sandbox | None = None
        self._stack: AsyncExitStack | None = None

    async def _start(self, task: Task) -> None:
        self._stack = AsyncExitStack()
        self.sandbox = await self._stack.enter_async_context(self.runtime.pool.lease(task.image))

    async def _stop(self) -> None:
        stack, self._stack, self.sandbox = self._stack, None, None
        if stack is not None:
            await stack.aclose()


class WorkspaceEnv(LeasedEnv):
    """The lease, the shell and its working directory; subclasses score."""

    action_timeout = ACTION_TIMEOUT

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.workdir = "/"
        self._cwd = "/"
        self._fresh = True  # the shell must be (re)started where the episode is

    def variables(self, task: Task) -> dict[str, str]:
        """Environment variables the task's shell starts with."""
        return {}

    def start_dir(self, task: Task, image_workdir: str) -> str:
        return image_workdir

    def agent_user(self) -> str | None:
        """Who the agent's actions run as (Docker's forms, or "image": the image's USER); None: root."""
        return None

    async def _start(self, task: Task) -> None:
        self.workdir = self.start_dir(task, await self.runtime.image_workdir(task.image))
        self._cwd, self._fresh = self.workdir, True
        await super()._start(task)

    async def shell(self, action: str, timeout: float) -> ExecResult:
        """Run `action` in the episode's shell; a stopped or dead shell is started again first."""
        assert self.sandbox is not None and self.task is not None
        if self._fresh:
            exports = "".join(f"export {name}={shlex.quote(value)}; " for name, value in self.variables(self.task).items())
            await self.sandbox.session(f"{exports}cd {shlex.quote(self._cwd)}", timeout=10.0, cap=4096,
                                       user=self.agent_user())
            self._fresh = False
        result = await self.sandbox.session(action, timeout=timeout, cap=OUTPUT_CAP, user=self.agent_user())
        if result.timed_out or result.flooded or result.exit_code < 0:
            self._fresh = True  # the driver ended that shell: the next starts where this one was
        elif result.cwd:
            self._cwd = result.cwd
        return result

    async def _execute(self, action: str) -> tuple[str, bool]:
        result = await self.shell(action, self.action_timeout)
        return describe(result, self.action_timeout), result.ok


def describe(result: ExecResult, timeout: float) -> str:
    """An action's observation: its output, and a line saying so when it was cut short."""
    notes = []
    if result.timed_out:
        notes.append(f"[the command ran longer than {timeout:g} s and was stopped; the shell was restarted]")
    if result.flooded:
        notes.append("[the command printed too much and was stopped; the shell was restarted]")
    return "\n".join([result.output.rstrip("\n"), *notes]) if notes else result.output


JSON_DEPTH = 20  # levels of lists and objects a breakdown's value keeps; a deeper one (or a cycle) is text


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` as JSON keeps it, for breakdowns that go to the store (a JSON column): a scalar as
    it is, a list or tuple as a list and a mapping as an object, each item made safe in turn;
    anything else (or nested deeper than JSON_DEPTH) as its text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth < JSON_DEPTH and isinstance(value, list | tuple):
        return [json_safe(item, depth + 1) for item in value]
    if depth < JSON_DEPTH and isinstance(value, Mapping):
        return {str(key): json_safe(item, depth + 1) for key, item in value.items()}
    return str(value)
