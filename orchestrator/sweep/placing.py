"""The sweep's fourth level: the images built, then the site where episodes run.

`place` builds the images the episodes need (a task's image that fails to build costs its own
episodes, stored as task errors), moves installed agents' episodes to the images that mount them,
and sizes each image's pool. `open_site` opens this machine's site (local_site.py) or, with
[cluster], the hosts of a Ray cluster (orchestrator/cluster/site.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from environments.kind import kind_spec
from environments.runtime import pool_configs
from foundation.pool import ImagePoolConfig
from orchestrator.images.ensure import ensure_each
from orchestrator.site import Site
from orchestrator.sweep.config import PoolSettings, SweepConfig
from orchestrator.sweep.local_site import Capacity, open_local_site, run_label, services_of, warm_counts
from orchestrator.sweep.mounting import mounted_images, placed
from orchestrator.sweep.own_agents import YourAgents
from orchestrator.sweep.plan import PlannedEpisode
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.sweep_models import SweepModels
from orchestrator.tasksets.resolve import TaskSet
from tasks import Task

log = structlog.get_logger(__name__)
UNSET = PoolSettings()  # an image the sweep file says nothing of (read only)


@dataclass(frozen=True)
class Placement:
    todo: list[PlannedEpisode]  # the episodes, those whose image failed (or can't run here) made unavailable
    images: list[str]  # the images they lease containers of
    pools: dict[str, ImagePoolConfig]  # each image's pool


async def place(config: SweepConfig, todo: list[PlannedEpisode], task_sets: dict[str, TaskSet],
                data_dir: Path | None, your_agents: YourAgents, folder: Path | None) -> Placement:
    """The images built, the installed agents' episodes moved to the images that mount them, and
    each image's pool."""
    if config.cluster is not None:
        todo = _unavailable(todo, lambda task: bool(task.meta.get("mcp_servers")),
                            lambda task: "its MCP servers are reached from the sweep's process, which is not beside a "
                                         "cluster host's containers: run it without [cluster] (or --ray)")
    # "": a kind that needs no container; a task unavailable here has no image to build
    images = sorted({e.task.image for e in todo if e.task.image and e.task.unavailable is None})
    failed = await ensure_each(images + mounted_images(config.strategies, your_agents.layers), data_dir)
    if failed:
        todo = _without_images(todo, {image: error for image, error in failed.items() if image in images})
    needs = {image: found for task_set in task_sets.values() for image, found in task_set.hardening.items()}
    todo, needs = await placed(todo, your_agents.installed, your_agents.layers, failed, folder, needs)
    running = [e.task for e in todo if e.task.image and e.task.unavailable is None]
    # a Harbor task's separate verifier leases containers of its own image, pooled as the tasks' are
    images = sorted({t.image for t in running} | {t.meta["verifier_image"] for t in running if t.meta.get("verifier_image")})
    return Placement(todo, images, sweep_pool_configs(config, images, needs))


@asynccontextmanager
async def open_site(config: SweepConfig, placement: Placement, models: SweepModels, progress: SweepProgress,
                    run_id: int, data_dir: Path | None) -> AsyncIterator[tuple[Site, Capacity | None]]:
    """This machine's site and its pools' capacity, or a cluster's hosts (no capacity to steer by:
    each host keeps its own)."""
    if config.cluster is None:
        async with open_local_site(config, placement.todo, placement.pools, models, progress, run_id,
                                   data_dir) as (site, capacity):
            yield site, capacity
        return
    async with _cluster_site(config, placement, run_id, data_dir) as cluster:
        progress.attach(models.client, None)
        progress.warmed()
        yield cluster, None


@asynccontextmanager
async def _cluster_site(config: SweepConfig, placement: Placement, run_id: int,
                        data_dir: Path | None) -> AsyncIterator[Site]:
    """The hosts of a Ray cluster; the store, the plan, the LLM calls, their limits and the budget
    stay here, in one place for the whole cluster (docs/scale-out.md)."""
    from orchestrator.cluster.agent import AgentSettings
    from orchestrator.cluster.site import ClusterSite

    assert config.cluster is not None
    todo, images = placement.todo, placement.images
    environments = tuple(sorted({directory for e in todo if (directory := kind_spec(e.task.kind).directory)}))
    agent = AgentSettings(data_dir=str(data_dir) if data_dir else None, run_id=run_label(run_id),
                          reward_mode=config.reward_mode, pools=placement.pools, engine_wait=config.engine_wait,
                          engine_timeout=config.engine_timeout, node_gold_cache=True, environments=environments)
    async with ClusterSite.open(config.cluster, agent=agent, images=images, services=services_of(todo),
                                warm=warm_counts(todo, config.concurrency), concurrency=config.concurrency,
                                wait_for_hosts=config.engine_wait, sized=_sized(config, images)) as site:
        yield site


def _sized(config: SweepConfig, images: list[str]) -> frozenset[str]:
    """The images whose most containers at once the sweep file sets."""
    return frozenset(image for image in images if _pool_settings(config, image).max_size is not None)


def _pool_settings(config: SweepConfig, image: str) -> PoolSettings:
    return config.pools.get(image) or config.pools.get(image.removeprefix("intercode/")) or UNSET


def _without_images(todo: list[PlannedEpisode], failed: dict[str, str]) -> list[PlannedEpisode]:
    """The episodes, those of tasks whose image failed to build made unavailable (the build's
    error their line): they are stored as task errors, and the others run."""
    for image, error in failed.items():
        log.warning("image_failed", image=image, error=error)
    return _unavailable(todo, lambda task: task.image in failed,
                        lambda task: f"its image failed to build: {failed[task.image]}")


def _unavailable(todo: list[PlannedEpisode], which: Callable[[Task], bool],
                 why: Callable[[Task], str]) -> list[PlannedEpisode]:
    """The episodes, those of the tasks `which` picks made unavailable, `why` their line (stored
    as task errors; nothing to lease; the others run)."""
    made: dict[str, Task] = {}

    def of(task: Task) -> Task:
        if task.id not in made:
            made[task.id] = task.refused(why(task))
        return made[task.id]

    return [dataclasses.replace(e, task=of(e.task)) if which(e.task) and e.task.unavailable is None else e
            for e in todo]


def sweep_pool_configs(config: SweepConfig, images: list[str],
                       needs: dict[str, dict[str, Any]] | None = None) -> dict[str, ImagePoolConfig]:
    """Each image's pool: its defaults, what its tasks need (a Harbor task's resources and
    network), then the sweep file's [pools]."""
    configs = {}
    for image, base in pool_configs(images, needs or {}).items():
        settings = _pool_settings(config, image)
        if settings.max_size is not None and base.reset:  # a service image keeps its one shared server
            base = base.model_copy(update={"max_size": settings.max_size})
        if settings.disk_mb is not None:
            hardening = base.hardening.model_copy(update={"disk_mb": settings.disk_mb or None})
            base = base.model_copy(update={"hardening": hardening})
        configs[image] = base
    return configs
