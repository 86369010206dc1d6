"""One line for a pydantic ValidationError, the project's one formatter of them.

    raise ConfigError(f"{path}: {invalid_line(exc, SweepConfig)}") from None      # "models.0.nme: unknown key; allowed: ..."
    raise ConfigError(invalid_line(exc, Settings, key=lambda where: f"--{where}")) # a command's flags

The first error as `key.path: what is wrong`, with the keys allowed where an unknown one was
given, and how many more errors there are.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError


def invalid_line(exc: ValidationError, model: type[BaseModel], *, key: Callable[[str], str] = str) -> str:
    errors = exc.errors()
    first = errors[0]
    where = key(".".join(str(part) for part in first["loc"])) if first["loc"] else "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = f"unknown key; allowed: {', '.join(allowed_keys(model, first['loc'][:-1]))}"
    elif first["type"] == "missing":
        message = "required key is missing"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"


def allowed_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at `loc` (inside `model`) accepts."""
    found: Any = model
    parts = iter(loc)
    for part in parts:
        if isinstance(part, int):
            continue
        annotation = found.model_fields[part].annotation
        if typing.get_origin(annotation) is dict:
            next(parts, None)  # the table's own key (an image name), not a field
        found = next((a for a in (annotation, *getattr(annotation, "__args__", ()))
                      if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if found is None:
            return []
    return list(found.model_fields)
