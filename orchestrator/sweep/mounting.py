"""A sweep's installed agents ([[agents]]) and its terminus harness: the agents' layers built and
copied out to this machine, and their episodes placed in containers that mount what they need.

An installed agent's episode runs in its task's image under another name (the same image, tagged
`<image>-with-<agent>`), whose pool mounts, read-only, the agent's files and the driver's runtime
(orchestrator/images/agent_layer.py), and the gateway's folder, with its socket and the proxy the
agent's SDK reaches it through, read-only too: every container of the sweep mounts it, so an agent
must not be able to change the proxy the next episodes run, unlink the socket or bind its own, or
leave a file there (a connection to a socket needs no write to its file system). The terminus harness's twins mount the runtime (its tmux). So
nothing is rebuilt per task, golds are shared with the other strategies (same image id), and the
container still has no network.

    layers = agent_layers(config)                                  # wheels fetched: ImageError names the agent
    build(mounted_images(config, layers))
    todo, needs = await placed(todo, config.agents, layers, failed, gateway_dir, needs)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aiodocker

from agents.strategies.installed import AGENTS_DIR, GATEWAY_DIR, supports
from environments.kind import kind_spec
from foundation.engine import engine, engine_deadline
from foundation.errors import ConfigError
from foundation.settings import cache_dir
from orchestrator.images.agent_layer import RUNTIME_DIR, agent_spec, extract, host_folders
from orchestrator.images.specs import RUNTIME, ImageSpec, get, register
from orchestrator.sweep.config import InstalledAgentConfig, SweepConfig
from orchestrator.sweep.plan import PlannedEpisode
from tasks import Task

TERMINAL = "terminus"  # the built-in strategy that drives tmux from the driver's runtime: its twins mount the runtime


def agent_layers(config: SweepConfig) -> dict[str, ImageSpec]:
    """Each installed agent's layer, registered (its wheels fetched first); ConfigError for a
    sweep that would run them on a cluster's hosts."""
    if config.agents and config.cluster is not None:
        raise ConfigError(f"installed agents ({', '.join(a.name for a in config.agents)}) run on this machine only: "
                          "their gateway is this process's; remove [cluster] (or --ray), or the agents")
    return {agent.name: register(agent_spec(agent.name, agent.pip, agent.npm)) for agent in config.agents}


def mounted_images(strategies: list[str], layers: dict[str, ImageSpec]) -> list[str]:
    """What to build besides the tasks' images: the agents' layers, and the runtime they (and the
    terminus harness) mount."""
    tags = [spec.tag.removesuffix(":latest") for spec in layers.values()]
    return [*tags, get(RUNTIME).tag.removesuffix(":latest")] if tags or TERMINAL in strategies else tags


async def placed(todo: list[PlannedEpisode], agents: list[InstalledAgentConfig], layers: dict[str, ImageSpec],
                 failed: dict[str, str], gateway_dir: Path | None, needs: dict[str, dict[str, Any]],
                 ) -> tuple[list[PlannedEpisode], dict[str, dict[str, Any]]]:
    """The episodes, those of installed agents (and of the terminus harness) moved to their images'
    mounting twins, or made unavailable (a kind they can't run, a layer that failed to build); and
    what each twin's pool needs."""
    mounting = {*(agent.name for agent in agents), TERMINAL}
    if not any(e.strategy in mounting for e in todo):
        return todo, needs
    needs = dict(needs)
    async with engine() as docker:
        binds = await _binds(docker, layers, failed, gateway_dir)
        tasks: dict[tuple[str, str], Task] = {}
        moved = []
        for episode in todo:
            if episode.strategy not in mounting:
                moved.append(episode)
                continue
            key = (episode.strategy, episode.task.id)
            if key not in tasks:
                tasks[key] = await _twin(docker, episode.task, episode.strategy, binds.get(episode.strategy), failed,
                                         needs)
            moved.append(dataclasses.replace(episode, task=tasks[key]))
    return moved, needs


async def _binds(docker: aiodocker.Docker, layers: dict[str, ImageSpec], failed: dict[str, str],
                 gateway_dir: Path | None) -> dict[str, list[str]]:
    """What each mounting strategy's containers mount: the runtime (copied out of its image to this
    machine), and for an installed agent its files and the gateway's folder."""
    runtime = await extract(docker, get(RUNTIME).tag, RUNTIME_DIR, cache_dir() / "runtime")
    found = {TERMINAL: [f"{runtime}:{RUNTIME_DIR}:ro"]}
    for name, spec in layers.items():
        if spec.tag.removesuffix(":latest") in failed or gateway_dir is None:
            continue
        files = await extract(docker, spec.tag, f"{AGENTS_DIR}/{name}", host_folders())
        found[name] = [f"{files}:{AGENTS_DIR}/{name}:ro", f"{runtime}:{RUNTIME_DIR}:ro", f"{gateway_dir}:{GATEWAY_DIR}:ro"]
    return found


async def _twin(docker: aiodocker.Docker, task: Task, strategy: str, binds: list[str] | None, failed: dict[str, str],
                needs: dict[str, dict[str, Any]]) -> Task:
    """The task as the strategy's episodes run it: in the twin of its image, or unavailable."""
    if task.unavailable is not None or not task.image:
        return task
    why = ""
    if not supports(kind_spec(task.kind)):
        why = (f"{strategy!r} can't run a {task.kind} task: it acts in a container's shell and is scored by the "
               "container's state or its last output (Bash, Harbor, your shell environments)")
    elif binds is None:
        cause = next((error for tag, error in failed.items() if tag.startswith(f"intercode/agent-{strategy}-")), "")
        why = f"the installed agent {strategy!r}'s layer failed to build: {cause}"
    if why or binds is None:
        return task.refused(why)
    twin = f"{task.image}-with-{strategy}"
    if twin not in needs:
        async with engine_deadline(f"tag image {task.image}"):
            await docker.images.tag(f"{task.image}:latest", twin, tag="latest")
        needs[twin] = {**needs.get(task.image, {}), "binds": binds}
    return dataclasses.replace(task, image=twin)
