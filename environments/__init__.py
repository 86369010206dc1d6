"""InterCode environments: Bash, SQL, Python and CTF, each async and gym-like.

    async with Runtime.open(data_dir=path) as runtime:
        async with make_environment("sql", runtime) as env:
            query = await env.reset(task)
            obs, reward, done, info = await env.step("SELECT 1")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from environments.base import Environment
    from environments.runtime import Runtime

# kind -> "module:Class", imported on first use.
REGISTRY = {
    "bash": "environments.bash:BashEnv",
    "sql": "environments.sql:SqlEnv",
    "python": "environments.python:PythonEnv",
    "ctf": "environments.ctf:CtfEnv",
}


def environment_class(kind: str) -> type[Environment]:
    try:
        module, name = REGISTRY[kind].split(":")
    except KeyError:
        raise ConfigError(f"unknown environment {kind!r}; known: {', '.join(REGISTRY)}") from None
    return getattr(importlib.import_module(module), name)


def make_environment(kind: str, runtime: Runtime) -> Environment:
    return environment_class(kind)(runtime)
