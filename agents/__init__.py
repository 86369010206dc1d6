"""Agents: the Model and Strategy interfaces, and the models a run can use.

    from agents import get_strategy, resolve_model
"""

from agents.base import (
           STRATEGIES,
           EpisodeOutcome,
           Message,
           Model,
           Strategy,
           Turn,
           get_strategy,
)
from agents.models import (
           LLMModel,
           OracleModel,
           ReplayModel,
           check_llm,
           fenced,
           resolve_model,
)

__all__ = ["STRATEGIES", "EpisodeOutcome", "LLMModel", "Message", "Model", "OracleModel", "ReplayModel",
           "Strategy", "Turn", "check_llm", "fenced", "get_strategy", "resolve_model"]
