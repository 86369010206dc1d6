"""A library that a test module uses in a few of its tests, imported when first used.

Every pytest-xdist worker imports every test module to collect it. Imported at the top, litellm,
the openai and anthropic SDKs, mcp and inspect_ai cost each worker six of its eight seconds of
collection, whether or not it runs a test that uses them; `./dev test-fast` then spends a tenth of
its time importing. As `lazy("openai")`, a module is imported at its first attribute access.

    openai = lazy("openai")
    litellm = lazy("agents.llm._litellm", "litellm")   # the project's import of it, and its name there
"""

from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    def __init__(self, module: str, attribute: str | None) -> None:
        self._where = (module, attribute)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest asks every object of a module for such names as it collects
            raise AttributeError(name)
        module, attribute = self._where
        found = importlib.import_module(module)
        return getattr(getattr(found, attribute) if attribute else found, name)


def lazy(module: str, attribute: str | None = None) -> Any:
    """`module` (or its `attribute`), imported at the first attribute access."""
    return _Lazy(module, attribute)
