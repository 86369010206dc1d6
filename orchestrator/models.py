"""Which model a name means, for every command: "oracle", "replay:PATH" (the actions of a
trajectory file in the original's format), or a litellm model name (checked before any container
starts).

    model = resolve_model("openai/gpt-4o", client=client)      # LLMModel
    model = resolve_model("oracle", client=client)              # the task's gold solution
    model = resolve_model("replay:runs/x.json", client=client)  # the actions of a trajectory file
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agents.base import AnswerStyle, Message, Model
from agents.models import LLMModel, OracleModel, answer_as, check_llm
from foundation.errors import ConfigError
from orchestrator.fidelity.trajectories import Episode, TaskFinder, read_episodes

if TYPE_CHECKING:
    from agents.llm import LLMClient
    from tasks import Task


class ReplayModel:
    """Plays back the recorded actions of a trajectory file (the original format), turn by turn.

    A task's episode is the one whose query is the task's; failing that, the one the fidelity
    `TaskFinder` maps to it (dataset file and index, then a close query). Past the recorded
    actions, or for a task the file does not hold, it answers `submit`.
    """

    def __init__(self, path: Path, data_dir: Path | None = None) -> None:
        self.path = Path(path)
        self.name = f"replay:{self.path}"
        self.episodes = read_episodes(self.path)  # ConfigError on a missing or malformed file
        self._finder = TaskFinder(data_dir)
        self._by_task: dict[str, Episode | None] = {}

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        if task.id not in self._by_task:
            # TaskFinder reads dataset files: off the event loop.
            self._by_task[task.id] = await asyncio.to_thread(self._episode_of, task)
        episode = self._by_task[task.id]
        if episode is None or turn >= len(episode.turns):
            return answer_as(task, "submit", style, turn)
        return answer_as(task, episode.turns[turn].action, style, turn)

    def _episode_of(self, task: Task) -> Episode | None:
        query = _norm(task.query)
        for episode in self.episodes:
            if episode.kind == task.env and _norm(episode.query) == query:
                return episode
        for episode in self.episodes:
            found = self._finder.find(episode) if episode.kind == task.env else None
            if found is not None and found.id == task.id:
                return episode
        return None


def _norm(text: str) -> str:
    return " ".join(text.split())


def resolve_model(name: str, *, client: LLMClient, data_dir: Path | None = None) -> Model:
    """The model called `name`: "oracle", "replay:PATH", or a litellm model name (checked here)."""
    if name == "oracle":
        return OracleModel()
    if name.startswith("replay:"):
        path = name.removeprefix("replay:")
        if not path:
            raise ConfigError("replay needs a trajectory file: --model replay:PATH")
        return ReplayModel(Path(path), data_dir)
    check_llm(name, client)
    return LLMModel(client, name)
