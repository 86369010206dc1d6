"""Where a sweep's episodes get their environments: the Site protocol, which the sweep's runner
asks and two parts answer, this machine (orchestrator/sweep/local_site.py, LocalSite) and the hosts of
a Ray cluster (orchestrator/cluster/site.py, ClusterSite). Below both: neither imports the other."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from environments.base import EpisodeEnvironment
from tasks import Task


@dataclass(frozen=True, slots=True)
class Placed:
    """An episode's environment and where it runs: the host and the image's digest there."""

    env: EpisodeEnvironment  # here, or on a cluster's host (orchestrator.cluster.remote.RemoteEnvironment)
    host: str
    image_digest: str | None


class Site(Protocol):
    """Where episodes get their environments: this machine's runtime (LocalSite) or the hosts of a
    cluster (orchestrator.cluster.site.ClusterSite)."""

    @property
    def generation(self) -> int: ...

    async def engine_lost_since(self, generation: int) -> bool: ...

    def environment(self, task: Task, avoid: frozenset[str]) -> AbstractAsyncContextManager[Placed]:
        """The task's environment on a host, preferably not one of `avoid` (where it failed before)."""
        ...
