"""The sweep's first level: everything its file names, checked before anything is claimed.

The task sets resolved into tasks (and what tasks of your own bring: kinds, images), every model
checked, the agents of yours found, and the episodes planned. A refused sweep claims no output
directory.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path

import structlog

from environments.kind import kind_spec
from foundation.errors import ConfigError
from orchestrator.cluster import require_ray
from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.own_agents import YourAgents, find_your_agents
from orchestrator.sweep.plan import PlannedEpisode, plan
from orchestrator.sweep.sweep_models import check_models
from orchestrator.tasksets.resolve import TaskSet, resolve
from tasks import Task

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class SweepInputs:
    task_sets: dict[str, TaskSet]  # by label
    your_agents: YourAgents  # the agents of yours, their layers and digests
    episodes: list[PlannedEpisode]  # every episode of the sweep, stored or not
    identity: str  # what makes two runs the same sweep (the store refuses another's directory)
    parts: dict[str, str]  # what the identity is made of, by name -> digest: a refusal names what changed
    tasks: list[Task]  # every task of the task sets, in their order (an offline model's server answers them)


async def prepare(config: SweepConfig, data_dir: Path | None) -> SweepInputs:
    if config.cluster is not None:
        require_ray("the sweep's [cluster]")
    resolved = await asyncio.to_thread(load_task_sets, config, data_dir)
    await asyncio.to_thread(check_models, config, data_dir)
    your_agents = await asyncio.to_thread(find_your_agents, config)
    episodes = await _planned(config, {label: found.tasks for label, found in resolved.items()})
    identity = config.identity([*(found.digest for found in resolved.values()), *your_agents.digests])
    return SweepInputs(resolved, your_agents, episodes, identity, identity_parts(config, resolved, your_agents),
                       [task for found in resolved.values() for task in found.tasks])


def identity_parts(config: SweepConfig, task_sets: dict[str, TaskSet], your_agents: YourAgents) -> dict[str, str]:
    """The parts of the sweep's identity, each named as a refused resume names it: the sweep file
    (what of it defines the episodes), then each file of yours a task set or an agent is read from."""
    parts = {"the sweep file": config.identity()}
    for label, task_set in task_sets.items():
        for path, digest in task_set.sources.items():
            what = "folder" if Path(path).is_dir() else "file"
            parts[f"the {what} {path} of task set {label!r}"] = digest
    for agent in your_agents.files:
        parts[f"the file {agent.path} of agent {agent.name!r}"] = agent.digest
    return parts


def load_task_sets(config: SweepConfig, data_dir: Path | None) -> dict[str, TaskSet]:
    """Every task set, resolved; ConfigError when two environments of your own share a name."""
    found: dict[str, TaskSet] = {}
    places: dict[str, str] = {}
    for spec in config.tasks:
        task_set = found[spec.label] = resolve(spec, base_dir=config.base_dir, data_dir=data_dir)
        for note in task_set.notes:
            log.warning("task_set_note", task_set=spec.label, note=note)
        place = kind_spec(task_set.kind).directory
        if place is not None and places.setdefault(task_set.kind, place) != place:
            raise ConfigError(f"two environments are named {task_set.kind!r} ({places[task_set.kind]} and {place}): "
                              "rename one in its environment.toml")
    return found


async def _planned(config: SweepConfig, task_sets: dict[str, list[Task]]) -> list[PlannedEpisode]:
    """The plan, made in a thread: the event loop hears a SIGTERM meanwhile, and the thread then
    stops at its next epoch instead of finishing a plan nobody will run."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(plan, config, task_sets, stop)
    except asyncio.CancelledError:
        stop.set()
        raise
