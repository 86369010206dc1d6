"""Episodes on the hosts of a Ray cluster: one host agent per node owns its engine, warm pools,
services and gold cache; a sweep (`[cluster]` or `--ray`) or a trainer steps environments there.

    python -m orchestrator sweep sweep.toml --ray HEAD:6379

Nothing here imports Ray at package import: `ray` is an optional extra (`.[ray]`), imported by the
modules that need it. See docs/scale-out.md (use) and docs/cluster.md (the parts).
"""

from __future__ import annotations

import importlib.util

from foundation.errors import ConfigError


def require_ray(what: str) -> None:
    """ConfigError, one line, when Ray (the optional `ray` extra) is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(f"{what} needs Ray, an optional extra: pip install -e '.[ray]'")
