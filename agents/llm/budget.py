"""A per-sweep spending limit in dollars and tokens, shared by every call of an LLMClient.

The client checks it before each call and charges it after; once spent, calls raise
`BudgetExhausted` and the episode is marked as cut short by the budget, never scored as an answer.
The scheduler reads `exhausted` to start no new episodes. A call whose model has no known price
still counts its tokens, and is counted in `unpriced_calls`: a dollar limit cannot see its cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.llm.errors import ModelError
from agents.llm.usage import Usage


class BudgetExhausted(ModelError):
    """The sweep's budget is spent; no further model call is made."""


@dataclass
class Budget:
    max_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    unpriced_calls: int = 0

    @property
    def exhausted(self) -> bool:
        return ((self.max_usd is not None and self.spent_usd >= self.max_usd)
                or (self.max_tokens is not None and self.spent_tokens >= self.max_tokens))

    def check(self, model: str) -> None:
        if self.exhausted:
            raise BudgetExhausted(model, f"the budget is spent ({self.describe()})", kind="budget")

    def spend(self, usage: Usage) -> None:
        self.spent_tokens += usage.total_tokens
        if usage.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.spent_usd += usage.cost_usd

    def describe(self) -> str:
        parts = [f"${self.spent_usd:.4f}" + (f" of ${self.max_usd:g}" if self.max_usd is not None else ""),
                 f"{self.spent_tokens} tokens" + (f" of {self.max_tokens}" if self.max_tokens is not None else "")]
        return ", ".join(parts)
