"""A sweep's agents of its user's: those in Python files (`strategies = ["my_agents.py:CoT"]`) and
those installed in the task's container (`[[agents]]`). Loaded before anything is claimed (a file
that does not import, a package pip can't fetch: one line), then served for the sweep's length:
the LLM gateway their model calls reach (on the loopback interface, and on a unix socket in
`gateway_dir`, which installed agents' containers mount), each registered as the strategy of its name.

    yours = find_your_agents(config)                  # ConfigError or ImageError names the agent
    with gateway_folder(yours) as folder:             # the socket's folder (None: no installed agent)
        async with serving(yours, folder): ...        # episodes of those strategies run meanwhile
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents.base import AGENTS, register_agent
from agents.gateway import LLMGateway
from agents.gateway import proxy as gateway_proxy
from agents.own import LoadedAgent, is_agent_name, load_agent
from agents.strategies.external import ExternalStrategy
from agents.strategies.installed import InstalledAgent, InstalledStrategy
from orchestrator.images.specs import ImageSpec
from orchestrator.sweep.config import InstalledAgentConfig, SweepConfig
from orchestrator.sweep.mounting import agent_layers

SOCKET = "gateway.sock"


@dataclass(frozen=True)
class YourAgents:
    """The agents of yours a sweep names: one name for them in code, docs and the viewer."""

    files: list[LoadedAgent]  # agents of yours in Python files
    installed: list[InstalledAgentConfig]  # agents installed in the task's container
    layers: dict[str, ImageSpec]  # each installed agent's layer
    agent_time: float = 600.0  # seconds an installed agent may run when neither it nor the task says

    @property
    def digests(self) -> list[str]:
        """Of the agents' files: a changed agent is another sweep, as a changed task is."""
        return [agent.digest for agent in self.files]


def find_your_agents(config: SweepConfig) -> YourAgents:
    """The sweep's agents of yours, imported, and its installed agents' layers, their packages fetched."""
    files = [load_agent(name, config.base_dir) for name in config.strategies if is_agent_name(name)]
    # the sweep's episode time, less a minute (at most half of it) for the reset and the scoring
    agent_time = max(config.episode_timeout - 60.0, config.episode_timeout / 2)
    return YourAgents(files, list(config.agents), agent_layers(config), agent_time)


@contextmanager
def gateway_folder(your_agents: YourAgents) -> Iterator[Path | None]:
    """A folder of this run's for the gateway's socket and the proxy beside it (mounted into the
    containers of installed agents); removed at the end."""
    if not your_agents.installed:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="icgw-"))
    try:
        folder.chmod(0o755)
        shutil.copyfile(str(gateway_proxy.__file__), folder / "proxy.py")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@asynccontextmanager
async def serving(your_agents: YourAgents, folder: Path | None) -> AsyncIterator[LLMGateway | None]:
    """The gateway (when there are agents of yours) and their strategies, registered while it serves."""
    if not your_agents.files and not your_agents.installed:
        yield None
        return
    async with LLMGateway.serve(unix_socket=folder / SOCKET if folder is not None else None) as gateway:
        names = []
        for agent in your_agents.files:
            names.append(register_agent(ExternalStrategy(agent, gateway)).name)
        for declared in your_agents.installed:
            installed = InstalledAgent(declared.name, declared.command, dict(declared.env), declared.tool,
                                       declared.argument, declared.finish, tuple(declared.keep), declared.timeout,
                                       your_agents.agent_time, declared.skills_dir)
            names.append(register_agent(InstalledStrategy(installed, gateway)).name)
        try:
            yield gateway
        finally:
            for name in names:
                AGENTS.pop(name, None)
