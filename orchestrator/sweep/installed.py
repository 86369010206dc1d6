"""A sweep's installed agents ([[agents]]): their layers built and copied out to this machine, and
their episodes placed in containers that mount them.

An installed agent's episode runs in its task's image under another name (the same image, tagged
`<image>-with-<agent>`), whose pool mounts, read-only, the agent's files and the driver's runtime
(orchestrator/images/agent_layer.py), and the gateway's folder, with its socket and the proxy the
agent's SDK reaches it through. So nothing is rebuilt per task, golds are shared with the other
strategies (same image id), and the container still has no network.

    layers = agent_layers(config)                                  # wheels fetched: ImageError names the agent
    todo, needs = await placed(todo, config.agents, layers, gateway_dir, needs)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aiodocker
import structlog

from agents.strategies.installed import AGENTS_DIR, GATEWAY_DIR, supports
from foundation.engine import engine, engine_deadline
from foundation.errors import ConfigError
from foundation.settings import cache_dir
from orchestrator.images.agent_layer import RUNTIME_DIR, agent_spec, extract, host_folders
from orchestrator.images.specs import RUNTIME, ImageSpec, get, register
from orchestrator.sweep.config import InstalledAgentConfig, SweepConfig
from orchestrator.sweep.plan import PlannedEpisode
from tasks import Task

log = structlog.get_logger(__name__)


def agent_layers(config: SweepConfig) -> dict[str, ImageSpec]:
    """Each installed agent's layer, registered (its wheels fetched first); ConfigError for a
    sweep that would run them on a cluster's hosts."""
    if config.agents and config.cluster is not None:
        raise ConfigError(f"installed agents ({', '.join(a.name for a in config.agents)}) run on this machine only: "
                          "their gateway is this process's; remove [cluster] (or --ray), or the agents")
    return {agent.name: register(agent_spec(agent.name, agent.pip)) for agent in config.agents}


def image_tags(layers: dict[str, ImageSpec]) -> list[str]:
    """What to build besides the tasks' images: the agents' layers."""
    return [spec.tag.removesuffix(":latest") for spec in layers.values()]


async def placed(todo: list[PlannedEpisode], agents: list[InstalledAgentConfig], layers: dict[str, ImageSpec],
                 failed: dict[str, str], gateway_dir: Path, needs: dict[str, dict[str, Any]],
                 ) -> tuple[list[PlannedEpisode], dict[str, dict[str, Any]]]:
    """The episodes, those of installed agents moved to their images' mounting twins (or made
    unavailable: a kind they can't run, a layer that failed to build); and what each twin's pool needs."""
    by_name = {agent.name: agent for agent in agents}
    if not any(e.strategy in by_name for e in todo):
        return todo, needs
    needs = dict(needs)
    async with engine() as docker:
        mounts = await _mounts(docker, layers, failed)
        tasks: dict[tuple[str, str], Task] = {}
        moved = []
        for episode in todo:
            agent = by_name.get(episode.strategy)
            if agent is None:
                moved.append(episode)
                continue
            key = (agent.name, episode.task.id)
            if key not in tasks:
                tasks[key] = await _twin(docker, episode.task, agent, mounts.get(agent.name), failed, gateway_dir, needs)
            moved.append(dataclasses.replace(episode, task=tasks[key]))
    return moved, needs


async def _mounts(docker: aiodocker.Docker, layers: dict[str, ImageSpec], failed: dict[str, str]) -> dict[str, list[str]]:
    """Each agent's binds: its files and the runtime, copied out of their images to this machine."""
    found: dict[str, list[str]] = {}
    runtime = await extract(docker, get(RUNTIME).tag, RUNTIME_DIR, cache_dir() / "runtime")
    for name, spec in layers.items():
        if spec.tag.removesuffix(":latest") in failed:
            continue
        files = await extract(docker, spec.tag, f"{AGENTS_DIR}/{name}", host_folders())
        found[name] = [f"{files}:{AGENTS_DIR}/{name}:ro", f"{runtime}:{RUNTIME_DIR}:ro"]
    return found


async def _twin(docker: aiodocker.Docker, task: Task, agent: InstalledAgentConfig, binds: list[str] | None,
                failed: dict[str, str], gateway_dir: Path, needs: dict[str, dict[str, Any]]) -> Task:
    """The task as the agent's episodes run it: in the twin of its image, or unavailable."""
    if "unavailable" in task.meta or not task.image:
        return task
    why = ""
    if not supports(task.env):
        why = (f"the installed agent {agent.name!r} can't run a {task.env} task: it acts in a container's shell and is "
               "scored by the container's state or its last output (Bash, Harbor, your shell environments)")
    elif binds is None:
        cause = next((error for tag, error in failed.items() if tag.startswith(f"intercode/agent-{agent.name}-")), "")
        why = f"the installed agent {agent.name!r}'s layer failed to build: {cause}"
    if why or binds is None:
        return dataclasses.replace(task, meta={**task.meta, "unavailable": why}, image="")
    twin = f"{task.image}-with-{agent.name}"
    if twin not in needs:
        async with engine_deadline(f"tag image {task.image}"):
            await docker.images.tag(f"{task.image}:latest", twin, tag="latest")
        needs[twin] = {**needs.get(task.image, {}), "binds": [*binds, f"{gateway_dir}:{GATEWAY_DIR}"]}
    return dataclasses.replace(task, image=twin)
