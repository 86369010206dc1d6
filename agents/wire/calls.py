"""What the wire formats share: the call a request asks for, the usage an answer reports, and an
error that becomes the provider's error body with its HTTP status."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """One model call as a request asks for it, in OpenAI's message form (ours)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    stream: bool
    stream_usage: bool = False  # OpenAI's stream_options.include_usage
    custom_tools: frozenset[str] = frozenset()  # tools the agent declared freeform (Responses API `custom`)


@dataclass(frozen=True)
class Usage:
    prompt: int = 0
    completion: int = 0


class WireError(Exception):
    """A request answered with an error: its HTTP status and message (the body is the API's)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message
