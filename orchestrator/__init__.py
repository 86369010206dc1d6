"""InterCode Orchestrator: async evaluation of LLM coding agents in warm, isolated containers."""

__version__ = "0.1.0"
