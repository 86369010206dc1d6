"""The queue the sweep's workers take episodes from, fair across models and steered by containers.

Across models, the next episode goes to the model with the fewest episodes in flight: a slow
provider holds at most its share of the slots while the others have work.

Within the chosen model, the queue prefers an episode whose image has a container to spare (more
containers serving than episodes of that image in flight): a new container costs about 0.4 s of CPU
to create and start, dozens of episodes' worth of resets, and images whose tasks run longer would
otherwise keep asking for more. It looks a bounded way ahead in the model's order, and takes the
next episode anyway when none fits, so the order bends but every episode runs.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable

from orchestrator.sweep.plan import PlannedEpisode


class FairQueue:
    """Hands out episodes: the model with the fewest in flight first (ties in turn); `put_back`
    queues an episode to run again first, `done` frees its model's slot."""

    LOOKAHEAD = 64  # episodes of a model's order searched for one whose image has a container to spare

    def __init__(self, episodes: Iterable[PlannedEpisode], capacity: Callable[[str], int | None] | None = None) -> None:
        """`capacity(image)`: containers of the image serving or on their way; None: no limit to
        steer by (a shared service)."""
        self._pending: dict[str, collections.deque[PlannedEpisode]] = collections.defaultdict(collections.deque)
        for episode in episodes:
            self._pending[episode.key.model].append(episode)
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
        self.in_flight[episode.key.model] -= 1
        self.images_in_flight[episode.task.image] -= 1

    def put_back(self, episode: PlannedEpisode) -> None:
        self.done(episode)
        self._pending[episode.key.model].appendleft(episode)
