"""The driver's side of a host agent: what strategies use of `Environment`, served by an
environment on another node. A strategy runs unchanged against it.

    async with RemoteEnvironment(agent, "bash") as env:
        outcome = await strategy.run(env, task, model, max_turns=5)
    env.hosts                # the host of every step, in order

Each call awaits the actor's method (`await actor.method.remote(...)`); the reply carries the state
the strategies read without awaiting (`done`, `observation_rows()`), kept here until the next one.

Ray's errors end here: an error raised by the environment on the host is raised again as itself
(an EpisodeError stays one), and an agent that is gone (its worker or node died) is `HostLost`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import ray.exceptions

from environments.base import StepResult
from foundation.errors import SandboxError

if TYPE_CHECKING:
    from orchestrator.cluster.agent import Reply
    from tasks import Task


class HostLost(SandboxError):
    """The host agent serving an environment is gone: its containers went with it (an infra failure)."""


class RemoteEnvironment:
    def __init__(self, agent: Any, kind: str) -> None:
        self.agent = agent
        self.kind = kind
        self.env_id: int | None = None
        self.task: Task | None = None
        self.done = False
        self.hosts: list[str] = []  # the host that served each call, in order
        self._rows: list[Any] | None = None
        self._resetting: asyncio.Future[str] | None = None

    async def __aenter__(self) -> RemoteEnvironment:
        self.env_id = await self.agent.open_env.remote(self.kind)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def host(self) -> str | None:
        return self.hosts[-1] if self.hosts else None

    async def reset(self, task: Task, *, multi_turn: bool = False) -> str:
        self.task = task
        return await self._call("reset", task, multi_turn)

    def begin_reset(self, task: Task, *, multi_turn: bool = False) -> asyncio.Future[str]:
        """As `Environment.begin_reset`: the reset runs while the first answer is asked for."""
        self._resetting = asyncio.ensure_future(self.reset(task, multi_turn=multi_turn))
        return self._resetting

    async def ready(self) -> None:
        if self._resetting is not None:
            await self._resetting
            self._resetting = None

    async def step(self, action: str) -> StepResult:
        await self.ready()
        return await self._call("step", action)

    async def score(self) -> tuple[float, dict[str, Any]]:
        await self.ready()
        return await self._call("score")

    async def harness_step(self, action: str) -> tuple[float, str, bool]:
        await self.ready()
        return await self._call("harness_step", action)

    def observation_rows(self) -> list[Any] | None:
        return self._rows

    async def close(self) -> None:
        resetting, self._resetting = self._resetting, None
        if resetting is not None:
            resetting.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await resetting
        env_id, self.env_id = self.env_id, None
        if env_id is not None:
            with contextlib.suppress(ray.exceptions.RayActorError):  # a lost host has nothing left to give back
                await asyncio.shield(self.agent.close.remote(env_id))  # a cancelled episode still gives it back

    async def _call(self, method: str, *args: Any) -> Any:
        if self.env_id is None:
            raise RuntimeError("RemoteEnvironment used outside `async with`")
        try:
            reply: Reply = await getattr(self.agent, method).remote(self.env_id, *args)
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause from None  # the environment's own error, as a local one would raise it
        except ray.exceptions.RayActorError as exc:
            raise HostLost(f"the host agent of {self.host or 'this environment'} is gone during {method}: "
                           f"{type(exc).__name__}") from exc
        self.done, self._rows = reply.done, reply.rows
        self.hosts.append(reply.host)
        return reply.value
