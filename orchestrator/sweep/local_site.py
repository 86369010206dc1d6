"""Where a sweep's episodes run when it has no [cluster]: this machine's engine, through one Runtime.

`LocalSite` is the Site (orchestrator/site.py) of this machine; `open_local_site` opens its
runtime (the engine, the pool), starts the shared database servers in the background and warms
each image's share of the concurrency before the first episode.
"""

from __future__ import annotations

import collections
import math
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

from environments import make_environment
from environments.runtime import Runtime, is_service
from environments.sql_server import sql_server
from foundation.concurrency import TaskOwner, all_of
from foundation.errors import SandboxError
from foundation.pool import ImagePoolConfig
from foundation.settings import cache_dir
from orchestrator.site import Placed, Site
from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.plan import PlannedEpisode
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.sweep_models import SweepModels
from tasks import Task

log = structlog.get_logger(__name__)

Capacity = Callable[[str], int | None]  # an image's containers serving or on their way; None: no limit to steer by


class LocalSite:
    """Episodes on this machine's engine, through one Runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.host = socket.gethostname()

    @property
    def generation(self) -> int:
        return self.runtime.generation

    async def engine_lost_since(self, generation: int) -> bool:
        return await self.runtime.engine_lost_since(generation)

    @asynccontextmanager
    async def environment(self, task: Task, avoid: frozenset[str] = frozenset()) -> AsyncIterator[Placed]:
        digest = await self.runtime.image_digest(task.image) if task.image else None  # a kind without containers has none
        async with make_environment(task.kind, self.runtime) as env:
            yield Placed(env, self.host, digest)


def _held_to_the_protocol(site: LocalSite) -> Site:
    """Never called: the type checker holds this machine's site to the Site protocol here."""
    return site


@asynccontextmanager
async def open_local_site(config: SweepConfig, todo: list[PlannedEpisode], pools: dict[str, ImagePoolConfig],
                          models: SweepModels, progress: SweepProgress, run_id: int,
                          data_dir: Path | None) -> AsyncIterator[tuple[LocalSite, Capacity]]:
    async with Runtime.open(data_dir=data_dir, reward_mode=config.reward_mode, images=pools,
                            run_id=run_label(run_id), gold_dir=cache_dir() / "gold",
                            engine_wait=config.engine_wait, engine_timeout=config.engine_timeout) as runtime:
        progress.attach(models.client, runtime)
        # The shared database servers start in the background: an episode's reset joins the start,
        # and its first model call runs meanwhile (see agents.strategies.turns.ask). A failed
        # start is met, and reported, by the episodes that need the server.
        async with TaskOwner("services") as services:  # done long ago, unless the sweep stopped at once
            for image in services_of(todo):
                services.spawn(sql_server(runtime, image), name=image)
            await _warm(runtime, todo, config.concurrency)
            progress.warmed()
            yield LocalSite(runtime), runtime.capacity


async def _warm(runtime: Runtime, todo: list[PlannedEpisode], concurrency: int) -> None:
    """Start each image's share of the concurrency in containers before the first episode, so
    episodes don't queue behind container start-up."""
    wanted = warm_counts(todo, concurrency)
    started = time.monotonic()
    try:
        await all_of(runtime.pool.warm(image, n) for image, n in wanted.items())
    except SandboxError as exc:  # the episodes will meet (and classify) the same trouble
        log.warning("pool_warm_failed", error=str(exc))
    log.info("pools_warm", containers=wanted, seconds=round(time.monotonic() - started, 2))


def warm_counts(todo: list[PlannedEpisode], concurrency: int) -> dict[str, int]:
    """Each image's share of the concurrency: the containers to warm before the first episode."""
    counts = collections.Counter(e.task.image for e in todo if e.task.unavailable is None)
    return {image: min(n, math.ceil(concurrency * n / len(todo))) for image, n in counts.items()
            if image and not is_service(image)}


def services_of(todo: list[PlannedEpisode]) -> list[str]:
    """The shared service images (a database server) the episodes need."""
    return sorted({e.task.image for e in todo if is_service(e.task.image)})


def run_label(run_id: int) -> str:
    """The label of this run's containers: unique across output directories, processes and hosts
    (every fresh directory's first run is run 1), so a pool that closes removes only its own."""
    return f"sweep-{run_id}-{uuid.uuid4().hex[:12]}"
