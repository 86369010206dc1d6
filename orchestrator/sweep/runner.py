"""One episode of a sweep: run the strategy under the episode's time limit, classify any failure,
re-run infrastructure failures a bounded number of times, and return what the store keeps.

Failure classes:
- **model**: the model could not answer (ModelError, a spent budget); the strategy records it.
- **task**: the task can't run or ran too long (unavailable offline, over the time limit), or an
  unexpected error of ours (logged with its traceback).
- **infra**: a container died, its driver was lost, the engine failed; these are re-run.

An infra failure while the engine went away (a restart, a crash) is the engine's, not the
episode's: the runner waits for the engine to come back (foundation.engine_watch) and runs the
episode again without counting it against `infra_retries`. So is an episode whose deadline passed
while the engine was away. Only the episode's own deadline makes a `timeout`: a TimeoutError from
anywhere else is not one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import aiodocker
import aiohttp
import structlog

from agents.base import EpisodeOutcome, Turn, get_strategy
from agents.episode import run_episode
from agents.recording import EpisodeCalls, Transcript
from environments.base import EpisodeEnvironment, ScoringFailed, TaskUnavailable
from foundation.errors import SandboxError, UserError
from foundation.outcome import FailureClass, Status
from foundation.timeline import Timeline
from orchestrator.site import Site
from orchestrator.store import EpisodeRecord, TurnRecord
from orchestrator.sweep.sweep_models import SweepModels
from orchestrator.sweep.plan import PlannedEpisode
from tasks import Task

log = structlog.get_logger(__name__)
# The engine's errors are translated at their boundary into SandboxErrors; the others are here so
# that one we missed is still never a task's failure.
INFRA_ERRORS = (SandboxError, aiodocker.DockerError, aiohttp.ClientError, ConnectionError)
MAX_OUTAGES = 20  # re-runs of one episode for engine outages (an engine that keeps restarting)


class EpisodeTimedOut(Exception):
    """The episode's own deadline passed."""


class EpisodeRunner:
    def __init__(self, site: Site, models: SweepModels, *, max_turns: int, timeout: float,
                 retries: int, on_retry: Callable[[PlannedEpisode, str], None] | None = None) -> None:
        self.site, self.models = site, models
        self.max_turns, self.timeout, self.retries = max_turns, timeout, retries
        self.on_retry = on_retry or (lambda episode, reason: None)

    async def run(self, episode: PlannedEpisode) -> EpisodeRecord:
        """The episode's record; raises only on cancellation and on user errors (image not built,
        an engine that stayed away longer than the sweep waits)."""
        attempt, counted, outages = 1, 0, 0
        failed_on: set[str] = set()  # hosts where an attempt met an infra failure: the next goes elsewhere
        while True:
            record = self._record(episode, attempt)
            generation = self.site.generation
            try:
                await self._play(episode, record, frozenset(failed_on))
            except (*INFRA_ERRORS, EpisodeTimedOut) as exc:
                if record.host is not None and not isinstance(exc, EpisodeTimedOut):
                    failed_on.add(record.host)
                if outages < MAX_OUTAGES and await self.site.engine_lost_since(generation):
                    outages += 1
                    log.info("episode_rerun_after_engine_outage", task=episode.task.id, model=episode.model,
                             error=_line(exc))
                elif isinstance(exc, EpisodeTimedOut):
                    took = f"the episode took longer than {exc.args[0]:g} s"
                    return self._failed(record, Status.TIMEOUT, FailureClass.TASK, took)
                elif counted >= self.retries:
                    return self._failed(record, Status.INFRA_ERROR, FailureClass.INFRA, exc)
                else:
                    counted += 1
                    log.warning("episode_retry", task=episode.task.id, model=episode.model, attempt=attempt,
                                failure_class="infra", host=record.host, error=_line(exc))
                self.on_retry(episode, _line(exc))
                attempt += 1
                continue
            except TaskUnavailable as exc:
                return self._failed(record, Status.TASK_ERROR, FailureClass.TASK, exc)
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 — one episode never stops the sweep
                log.error("episode_error", task=episode.task.id, model=episode.model, exc_info=True)
                return self._failed(record, Status.TASK_ERROR, FailureClass.TASK, exc)
            return record

    def _record(self, episode: PlannedEpisode, attempt: int) -> EpisodeRecord:
        task = episode.task
        return EpisodeRecord(key=episode.key, env=task.kind, dataset=task.dataset, task_index=task.index,
                             query=task.query, gold=task.gold_text, image=task.image, max_turns=self.turns(task),
                             started_at=time.time(), attempts=attempt)

    def turns(self, task: Task) -> int:
        """The task's turn budget: its own (your environment's manifest), else the sweep's."""
        return task.max_turns or self.max_turns

    def time_limit(self, task: Task) -> float:
        """Seconds the task's episode may take: its own (a Harbor task's timeouts, your environment's
        manifest), else the sweep's."""
        return task.time_limit or self.timeout

    async def _play(self, episode: PlannedEpisode, record: EpisodeRecord, avoid: frozenset[str]) -> None:
        record.transcript = Transcript() if self.models.config.transcripts else None
        model = self.models.for_episode(episode.key.model)
        limit = self.time_limit(episode.task)
        deadline = asyncio.timeout(limit)
        try:
            async with deadline:  # this attempt's calls, actions and scorings on its timeline
                played = await run_episode(self._placed(episode.task, avoid, record), get_strategy(episode.key.strategy),
                                           episode.task, model, max_turns=record.max_turns,
                                           timeline=Timeline(record.started_at),
                                           calls=EpisodeCalls(record.calls, record.transcript))
        except TimeoutError:
            if deadline.expired():
                raise EpisodeTimedOut(limit) from None
            raise
        _fill(record, played.outcome, played.failure)

    @asynccontextmanager
    async def _placed(self, task: Task, avoid: frozenset[str], record: EpisodeRecord) -> AsyncIterator[EpisodeEnvironment]:
        """The site's environment for `task`, its host and image noted in the record."""
        async with self.site.environment(task, avoid) as placed:
            record.host, record.image_digest = placed.host, placed.image_digest
            yield placed.env

    @staticmethod
    def _failed(record: EpisodeRecord, status: Status, failure_class: FailureClass,
                error: BaseException | str) -> EpisodeRecord:
        record.status, record.failure_class = status, failure_class
        record.error = error if isinstance(error, str) else _line(error)
        record.finished_at = time.time()
        return record


def _fill(record: EpisodeRecord, outcome: EpisodeOutcome, failure: ScoringFailed | None = None) -> None:
    """The outcome into the record; an episode its environment could not score is stored as that
    failure (a verifier or reward error), its turns kept."""
    record.turns = [_turn_record(t) for t in outcome.turns]
    record.status = outcome.status
    if outcome.status in (Status.MODEL_ERROR, Status.BUDGET_EXHAUSTED):
        record.failure_class, record.error = FailureClass.MODEL, outcome.error
    elif outcome.status == Status.AGENT_ERROR:  # an agent of yours raised: its failure, never re-run
        record.failure_class, record.error = FailureClass.AGENT, outcome.error
        log.info("episode_agent_error", task=record.key.task_id, strategy=record.key.strategy, error=outcome.error)
    elif failure is not None:
        record.status, record.failure_class, record.error = failure.status, failure.failure_class, _line(failure)
        log.info("episode_not_scored", task=record.key.task_id, status=record.status, error=record.error)
    record.finished_at = time.time()


def _turn_record(turn: Turn) -> TurnRecord:
    timing = turn.timing
    if timing is None:
        return TurnRecord(turn.output, turn.action, turn.observation, turn.reward, turn.executed, turn.breakdown,
                          rewritten=turn.rewritten)
    spans = [[s.kind, round(s.start, 4), round(s.duration, 4)] for s in timing.spans]
    return TurnRecord(turn.output, turn.action, turn.observation, turn.reward, turn.executed, turn.breakdown,
                      timing.start, timing.duration, timing.call, spans, turn.rewritten)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]
