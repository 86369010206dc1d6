"""Host agents on a Ray cluster (issue 17, first slice): one actor per node owns that node's engine,
warm pool, services and gold cache, and serves the environment seam remotely.

    agents = await discover()                       # one handle per node with an intercode_host_* resource
    async with RemoteEnvironment(agents[0], "bash") as env:
        await env.reset(task)                       # a container on that node's engine

Nothing here imports Ray at package import: `ray` is an optional extra (`.[ray]`), imported by the
modules that need it. See docs/cluster.md.
"""

from __future__ import annotations

import importlib.util

from foundation.errors import ConfigError


def require_ray(what: str) -> None:
    """ConfigError, one line, when Ray (the optional `ray` extra) is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"{what} needs Ray, an optional extra: pip install -e '.[ray]'")
