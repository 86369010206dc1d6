"""A sweep's agents of yours (`strategies = ["my_agents.py:CoT"]`): loaded before anything is
claimed (a file that does not import is one line), then served for the sweep's length: the LLM
gateway their SDK clients reach, and each registered as the strategy of its name.

    found = load_agents(config)                      # ConfigError names the file
    async with serving(found) as gateway: ...        # episodes of those strategies run meanwhile
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agents.base import AGENTS, register_agent
from agents.gateway import LLMGateway
from agents.own import LoadedAgent, is_agent_name, load_agent
from agents.strategies.external import ExternalStrategy
from orchestrator.sweep.config import SweepConfig


def load_agents(config: SweepConfig) -> list[LoadedAgent]:
    """The agents of yours the sweep names, imported (paths from the sweep file's directory)."""
    return [load_agent(name, config.base_dir) for name in config.strategies if is_agent_name(name)]


@asynccontextmanager
async def serving(agents: list[LoadedAgent]) -> AsyncIterator[LLMGateway | None]:
    """The gateway (when there are agents of yours) and their strategies, registered while it serves."""
    if not agents:
        yield None
        return
    async with LLMGateway.serve() as gateway:
        for agent in agents:
            register_agent(ExternalStrategy(agent, gateway))
        try:
            yield gateway
        finally:
            for agent in agents:
                AGENTS.pop(agent.name, None)
