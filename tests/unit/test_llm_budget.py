"""A spent budget stops model calls; the episode is marked as cut short, never scored as an answer."""

from __future__ import annotations

import pytest

from agents.llm import Budget, BudgetExhausted
from agents.llm.usage import Usage


def usage(tokens: int, cost: float | None) -> Usage:
    return Usage(model="m", served_model="m", prompt_tokens=tokens, completion_tokens=0,
                 latency_s=0.1, attempts=1, cost_usd=cost)


def test_budget_counts_tokens_and_dollars_and_unpriced_calls():
    budget = Budget(max_usd=0.01, max_tokens=1000)
    budget.spend(usage(400, 0.004))
    budget.spend(usage(300, None))
    assert (budget.spent_tokens, budget.spent_usd, budget.unpriced_calls) == (700, 0.004, 1)
    assert not budget.exhausted
    budget.check("m")
    budget.spend(usage(300, 0.001))
    assert budget.exhausted, "1000 tokens reached"
    with pytest.raises(BudgetExhausted, match="budget is spent") as caught:
        budget.check("m")
    assert caught.value.kind == "budget"
    assert Budget(max_usd=0.005, spent_usd=0.006).exhausted
