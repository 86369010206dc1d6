"""Agents: the Model and Strategy interfaces, and the models a run can use.

    from agents import get_strategy, OracleModel
"""

from agents.base import (
           STRATEGIES,
           EpisodeOutcome,
           Message,
           Model,
           Strategy,
           ToolAnswer,
           ToolCall,
           ToolModel,
           Turn,
           get_strategy,
)
from agents.models import (
           LLMModel,
           OracleModel,
           check_llm,
           fenced,
)

__all__ = ["STRATEGIES", "EpisodeOutcome", "LLMModel", "Message", "Model", "OracleModel", "Strategy", "ToolAnswer",
           "ToolCall", "ToolModel", "Turn", "check_llm", "fenced", "get_strategy"]
