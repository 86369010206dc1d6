"""Model access for agents: one async client over litellm, and a scripted local provider (the `local`
models of a sweep, tests and benchmarks).

The interface agents depend on is `LLM`; `LLMClient` is its implementation. Failures arrive as
`ModelError`; limits, retries and usage accounting happen inside the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .budget import Budget, BudgetExhausted
from .client import ChatMessage, Completion, LLMClient, ModelSpec
from .errors import ModelError
from .limits import ModelLimits, ModelStats
from .retry import RetryPolicy
from .transport import ToolCall
from .usage import Usage, UsageLedger


class LLM(Protocol):
    """What an agent needs from a model."""

    async def complete(self, model: str, messages: Sequence[ChatMessage], *,
                       tools: Sequence[dict[str, Any]] | None = None, **params: Any) -> Completion: ...


__all__ = ["LLM", "Budget", "BudgetExhausted", "Completion", "LLMClient", "ChatMessage", "ModelError", "ModelLimits", "ModelSpec",
           "ModelStats", "RetryPolicy", "ToolCall", "Usage", "UsageLedger"]
