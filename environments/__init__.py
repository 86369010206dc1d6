"""The environments, one per kind, each async and gym-like: InterCode's Bash, SQL, Python and CTF,
Harbor's task folders (`harbor`), and kinds of your own (an environment directory's, or a module
that registers one: environments/kind.py).

    async with Runtime.open(data_dir=path) as runtime:
        async with make_environment("sql", runtime) as env:
            query = await env.reset(task)
            obs, reward, done, info = await env.step("SELECT 1")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from environments.kind import kind_spec

if TYPE_CHECKING:
    from environments.base import Environment
    from environments.runtime import Runtime

def environment_class(kind: str) -> type[Environment]:
    """The Environment class of `kind` (its KindSpec's); ConfigError for an unknown kind."""
    return kind_spec(kind).environment


def make_environment(kind: str, runtime: Runtime) -> Environment:
    return environment_class(kind)(runtime)
