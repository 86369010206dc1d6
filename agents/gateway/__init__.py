"""The LLM gateway: the sweep's models served as OpenAI's and Anthropic's HTTP APIs to agents of
yours, a token per episode (server.py); the wire formats, shared with the scripted provider, are
agents/wire's."""

from agents.gateway.server import Door, LLMGateway

__all__ = ["Door", "LLMGateway"]
