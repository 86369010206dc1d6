"""The sweep's last level: `concurrency` workers over the fair queue, each storing its episode.

A worker takes the next episode from the queue (fair_queue.py), runs it (runner.py), and commits
it before taking another, so an interruption at any point loses only the episodes in flight, which
a re-run runs again. A spent budget stops new episodes; those are left for a resume.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from foundation.errors import UserError
from orchestrator.site import Site
from orchestrator.store import EpisodeRecord
from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.fair_queue import FairQueue
from orchestrator.sweep.local_site import Capacity
from orchestrator.sweep.plan import PlannedEpisode
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.runner import EpisodeRunner
from orchestrator.sweep.stored_run import StoredRun
from orchestrator.sweep.sweep_models import SweepModels


class SweepIncomplete(UserError):
    """Episodes were lost without an error of their own: the run is not finished (a resume runs them)."""


async def run_workers(config: SweepConfig, todo: list[PlannedEpisode], site: Site, capacity: Capacity | None,
                      models: SweepModels, run: StoredRun, progress: SweepProgress) -> int:
    """Run `todo`; returns how many episodes were left unstarted (a spent budget stops new ones)."""
    runner = EpisodeRunner(site, models, max_turns=config.max_turns, timeout=config.episode_timeout,
                           retries=config.infra_retries, on_retry=progress.retried)
    queue = FairQueue(todo, capacity=capacity)
    budget = models.client.budget
    stored = 0

    async def worker() -> None:
        nonlocal stored
        while not (budget is not None and budget.exhausted) and (episode := queue.take()) is not None:
            progress.started(episode)
            try:
                record = await _run_one(runner, episode)
            finally:
                queue.done(episode)
            await run.store.add_episode(run.run_id, config.name, record, spent=models.spent_this_run())
            stored += 1
            progress.finished(episode, record)

    with _steady_gc():
        try:
            async with asyncio.TaskGroup() as group:
                for n in range(min(config.concurrency, len(todo))):
                    group.create_task(worker(), name=f"worker-{n}")
        except BaseExceptionGroup as group_error:
            raise _first(group_error) from None
    if stored + len(queue) != len(todo):  # every episode is stored, or left for a resume by the budget
        raise SweepIncomplete(f"{len(todo) - len(queue) - stored} episodes of this run were neither stored nor "
                              "left for a resume: run the same command to run them")
    return len(queue)


async def _run_one(runner: EpisodeRunner, episode: PlannedEpisode) -> EpisodeRecord:
    """The episode's record. A cancellation its worker was not sent (one that leaked from work it
    shared with another episode) is an error naming the episode, never a worker quietly gone."""
    try:
        return await runner.run(episode)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raise SweepIncomplete(f"episode {episode.task.id} ({episode.model}, {episode.strategy}, epoch "
                              f"{episode.key.epoch}) ended with a cancellation nobody sent: run the same command "
                              "to run it again") from None


@contextmanager
def _steady_gc() -> Iterator[None]:
    """The episode phase with fewer, cheaper garbage collections.

    Hundreds of episodes in flight keep many objects alive, and with the default thresholds the
    collector scans them all over again: about 7% of the sweep process's time at 256 at once.
    What start-up made (modules, pools, task lists) is frozen out of the scans, and the youngest
    generation is collected less often; the settings from before are restored afterwards.
    """
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(thresholds[0], 20_000), thresholds[1], max(thresholds[2], 20))
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _first(group_error: BaseExceptionGroup) -> BaseException:
    """The error to report from a failed TaskGroup: a user error if there is one."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group_error]
    while stack:
        error = stack.pop()
        if isinstance(error, BaseExceptionGroup):
            stack.extend(error.exceptions)
        else:
            leaves.append(error)
    return next((e for e in leaves if isinstance(e, UserError)), leaves[0])
