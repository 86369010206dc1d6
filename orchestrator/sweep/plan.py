"""The episodes of a sweep, and the fair order in which workers take them.

Within a model, episodes go epoch by epoch, alternating between (strategy, task set) cells, so
that partial results cover every cell early and containers of every image get used. Across models,
the `Dispatcher` hands the next episode to the model with the fewest episodes in flight: a slow
provider holds at most its share of the slots while the others have work.

Within the chosen model, the dispatcher prefers an episode whose image has a container to spare
(more containers serving than episodes of that image in flight): a new container costs about
0.4 s of CPU to create and start, dozens of episodes' worth of resets, and images whose tasks run
longer would otherwise keep asking for more. It looks a bounded way ahead in the model's order,
and takes the next episode anyway when none fits, so the order bends but every episode runs.
"""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from foundation.errors import ConfigError
from orchestrator.store import EpisodeKey
from orchestrator.sweep.config import MAX_EPISODES, SweepConfig
from orchestrator.tasksets import TaskSetConfig, resolve
from tasks import Task


@dataclass(frozen=True, slots=True)
class PlannedEpisode:
    key: EpisodeKey
    task: Task

    @property
    def model(self) -> str:
        return self.key.model

    @property
    def strategy(self) -> str:
        return self.key.strategy


def select_tasks(spec: TaskSetConfig, data_dir: Path | None, base_dir: Path | None = None) -> list[Task]:
    """The tasks of one task set: filtered, then sampled (seeded) or cut to `limit` (see
    orchestrator/tasksets.py, which also registers what tasks of your own bring)."""
    return resolve(spec, base_dir=base_dir or Path.cwd(), data_dir=data_dir).tasks


def plan(config: SweepConfig, task_sets: dict[str, list[Task]],
         stop: threading.Event | None = None) -> list[PlannedEpisode]:
    """Every episode of the sweep, each model's in its fair order; ConfigError, before anything
    is built, for a plan of more than MAX_EPISODES. Planned in a thread (a large plan takes
    seconds), it ends early, with an empty plan, once `stop` is set (the sweep was interrupted)."""
    check_size(config, task_sets)
    episodes: list[PlannedEpisode] = []
    for model in config.models:
        for epoch in range(config.epochs):
            if stop is not None and stop.is_set():
                return []
            cells = [[PlannedEpisode(EpisodeKey(model.name, strategy, label, task.id, epoch), task) for task in tasks]
                     for strategy in config.strategies for label, tasks in task_sets.items()]
            episodes.extend(_round_robin(cells))
    return episodes


def check_size(config: SweepConfig, task_sets: dict[str, list[Task]]) -> int:
    """The number of episodes the sweep plans, counted, not built; ConfigError past MAX_EPISODES."""
    tasks = sum(len(found) for found in task_sets.values())
    models, strategies, epochs = len(config.models), len(config.strategies), config.epochs
    size = tasks * models * strategies * epochs
    if size > MAX_EPISODES:
        raise ConfigError(f"the sweep plans {size:,} episodes ({tasks} tasks × {_count(models, 'model')} × "
                          f"{_count(strategies, 'strategy', 'strategies')} × {_count(epochs, 'epoch')}), more "
                          f"than the {MAX_EPISODES:,} a sweep may plan: lower `epochs`, `sample` or `limit`, or "
                          "split it into several sweep files")
    return size


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _round_robin(lists: Iterable[list[PlannedEpisode]]) -> Iterator[PlannedEpisode]:
    for group in itertools.zip_longest(*lists):
        yield from (item for item in group if item is not None)


class Dispatcher:
    """Hands out episodes: the model with the fewest in flight first (ties in turn); `put_back`
    queues an episode to run again first, `done` frees its model's slot."""

    LOOKAHEAD = 64  # episodes of a model's order searched for one whose image has a container to spare

    def __init__(self, episodes: Iterable[PlannedEpisode], capacity: Callable[[str], int | None] | None = None) -> None:
        """`capacity(image)`: containers of the image serving or on their way; None: no limit to
        steer by (a shared service)."""
        self._pending: dict[str, collections.deque[PlannedEpisode]] = collections.defaultdict(collections.deque)
        for episode in episodes:
            self._pending[episode.model].append(episode)
        self._order = list(self._pending)
        self.in_flight: collections.Counter[str] = collections.Counter()
        self.images_in_flight: collections.Counter[str] = collections.Counter()
        self._capacity = capacity
        self._turn = 0

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._pending.values())

    def take(self) -> PlannedEpisode | None:
        ready = [m for m in self._order if self._pending[m]]
        if not ready:
            return None
        start = self._turn % len(self._order)
        rotated = self._order[start:] + self._order[:start]
        model = min((m for m in rotated if m in ready), key=lambda m: self.in_flight[m])
        self._turn += 1
        self.in_flight[model] += 1
        episode = self._next(self._pending[model])
        self.images_in_flight[episode.task.image] += 1
        return episode

    def _next(self, queue: collections.deque[PlannedEpisode]) -> PlannedEpisode:
        if self._capacity is not None:
            for i, episode in enumerate(itertools.islice(queue, self.LOOKAHEAD)):
                if self._spare(episode.task.image):
                    del queue[i]
                    return episode
        return queue.popleft()

    def _spare(self, image: str) -> bool:
        assert self._capacity is not None
        capacity = self._capacity(image)
        return capacity is None or capacity > self.images_in_flight[image]

    def done(self, episode: PlannedEpisode) -> None:
        self.in_flight[episode.model] -= 1
        self.images_in_flight[episode.task.image] -= 1

    def put_back(self, episode: PlannedEpisode) -> None:
        self.done(episode)
        self._pending[episode.model].appendleft(episode)
