"""What each call cost: tokens, latency and dollars from litellm's local price map.

A model whose price litellm does not know is recorded with `cost_usd=None` (unknown), never 0,
so totals can say how much of the spend they could not price.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Usage:
    """One successful call."""

    model: str  # the litellm name we asked for
    served_model: str | None  # what the provider says answered (response.model)
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # from the first attempt to the answer, waits and retries included
    attempts: int
    cost_usd: float | None  # None: price unknown

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def map_version() -> tuple[int, int]:
    """Changes whenever litellm's model map does (replaced, or changed through `register_model`)."""
    from ._litellm import litellm  # only priced calls load it: offline sweeps never do

    return id(litellm.model_cost), litellm.utils.get_model_cost_mutation_generation()


_UNPRICED: set[tuple[str, tuple[int, int]]] = set()  # (model, the map's version) litellm could not price


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for these tokens from litellm's local map, or None if the model is not in it."""
    key = (model, map_version())
    if key in _UNPRICED:  # litellm's lookup of an unmapped model is slow: it builds an exception
        return None
    from ._litellm import litellm

    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception as exc:  # litellm raises a bare Exception for unmapped models: that means "unknown"
        log.debug("llm_price_unknown", model=model, error=str(exc)[:120])
        _UNPRICED.add(key)
        return None
    return float(prompt_cost) + float(completion_cost)


@dataclass
class UsageLedger:
    """Every call's usage, in completion order, with totals that keep unknown prices apart."""

    records: list[Usage] = field(default_factory=list)

    def add(self, usage: Usage) -> None:
        self.records.append(usage)

    @property
    def known_cost_usd(self) -> float:
        return sum(u.cost_usd for u in self.records if u.cost_usd is not None)

    @property
    def unpriced_calls(self) -> int:
        return sum(1 for u in self.records if u.cost_usd is None)
