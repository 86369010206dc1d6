"""The LLM gateway: the sweep's models served as OpenAI's and Anthropic's HTTP APIs to agents of
yours, a token per episode (server.py), the wire formats (openai_wire.py, anthropic_wire.py)."""

from agents.gateway.server import Door, LLMGateway

__all__ = ["Door", "LLMGateway"]
