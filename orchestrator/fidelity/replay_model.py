"""The model `replay:PATH` names: the actions of a trajectory file in the original's format,
played back turn by turn (sweep's resolve_model makes it from the name)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agents.base import AnswerStyle, Message
from agents.models import answer_as
from agents.recording import recorded
from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder, read_episodes

if TYPE_CHECKING:
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
        self._by_task: dict[str, RecordedEpisode | None] = {}

    async def complete(self, messages: Sequence[Message], *, task: Task, turn: int,
                       style: AnswerStyle = "fenced") -> str:
        start = time.time()
        if task.id not in self._by_task:
            # TaskFinder reads dataset files: off the event loop.
            self._by_task[task.id] = await asyncio.to_thread(self._episode_of, task)
        episode = self._by_task[task.id]
        action = "submit" if episode is None or turn >= len(episode.turns) else episode.turns[turn].action
        text = answer_as(task, action, style, turn)
        recorded(start, messages, text)
        return text

    def _episode_of(self, task: Task) -> RecordedEpisode | None:
        query = _norm(task.query)
        for episode in self.episodes:
            if episode.kind == task.kind and _norm(episode.query) == query:
                return episode
        for episode in self.episodes:
            found = self._finder.find(episode) if episode.kind == task.kind else None
            if found is not None and found.id == task.id:
                return episode
        return None


def _norm(text: str) -> str:
    return " ".join(text.split())
