"""Our side: one environment per suite, driven through the project's public API.

A turn is `agents.strategies.turns.harness_step`, the one our strategies and `replay` use. Bash
runs in the original's container lifecycle (`OriginalLifecycleBashEnv`: two long-lived containers,
reset with git), as the original side does; the other kinds as our sweeps run them. The reward's
terms are read from the environment's `score_info`, the info of the score harness_step asks for.
"""

from __future__ import annotations

from typing import Any

from agents.strategies.turns import harness_step
from environments import make_environment
from environments.base import Environment
from orchestrator.fidelity.original_lifecycle import OriginalLifecycleBashEnv
from environments.kind import kind_spec
from environments.runtime import Runtime
from environments.sql import SqlEnv
from environments.sql_server import SqlSettings
from foundation.errors import OrchestratorError
from tasks import Task

TERMS = ("file_diff", "file_changes", "answer_similarity")
CLIP = 4000


class OurHarness:
    """`mysql8`: SQL answers as MySQL 8 did (the replay's default); False (the harness's default),
    as MariaDB does, which the original side runs on: then both sides see the same server, and
    what differs is the rules."""

    def __init__(self, runtime: Runtime, kind: str, mysql8: bool = False) -> None:
        self.runtime, self.kind, self.mysql8 = runtime, kind, mysql8
        self.env = self._make()

    def _make(self) -> Environment:
        if kind_spec(self.kind).harness_history:
            return OriginalLifecycleBashEnv(self.runtime)
        if self.kind == "sql":
            return SqlEnv(self.runtime, SqlSettings(mysql8=self.mysql8))
        return make_environment(self.kind, self.runtime)

    async def renew(self) -> None:
        """New containers: close the environment (its containers go back to the pool) and make another."""
        try:
            await self.env.close()
        except OrchestratorError:
            pass  # broken containers are thrown away either way
        self.env = self._make()

    async def close(self) -> None:
        await self.env.close()

    async def reset(self, task: Task) -> dict[str, Any]:
        try:
            await self.env.reset(task, multi_turn=True)  # CTF: the multi-turn harness let agents retry
        except OrchestratorError as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        return {"ok": True}

    async def turn(self, action: str) -> dict[str, Any]:
        self.env.score_info = {}
        try:
            step = await harness_step(self.env, action)
        except OrchestratorError as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        answer: dict[str, Any] = {"reward": step.reward, "observation": step.observation[:CLIP],
                                  "executed": step.executed}
        info = self.env.score_info  # the reward's terms, from the score harness_step asked for
        if self.kind == "bash":
            answer["terms"] = {name: info.get(name) for name in TERMS}
            answer["info"] = {"diff_miss": str(info.get("diff_miss")), "diff_extra": str(info.get("diff_extra")),
                              "eval_obs": str(info.get("eval_obs", ""))[:CLIP]}
        return answer
