"""The episodes of a sweep, in each model's fair order.

Within a model, episodes go epoch by epoch, alternating between (strategy, task set) cells, so
that partial results cover every cell early and containers of every image get used. The workers
take them from a `FairQueue` (fair_queue.py).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from foundation.errors import ConfigError
from orchestrator.store import EpisodeKey
from orchestrator.store.records import Keyed
from orchestrator.sweep.config import MAX_EPISODES, SweepConfig
from tasks import Task


@dataclass(frozen=True, slots=True)
class PlannedEpisode(Keyed):
    key: EpisodeKey
    task: Task


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
