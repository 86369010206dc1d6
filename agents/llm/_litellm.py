"""The one place litellm is imported: the local cost map is forced first, so import never fetches it."""

from __future__ import annotations

import os

# Before the import, always: litellm otherwise downloads its price map at import time.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# OpenAI-compatible chat calls go through litellm's own HTTP handler (the one its other providers
# use) rather than through the openai SDK: the same request and reply at about a fifth less CPU per
# call, which at a few hundred calls a second is what keeps the LLM worker off its ceiling
# (docs/benchmarks.md). litellm reads the switch on every call; set it to False to get the SDK back.
os.environ.setdefault("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "True")

import litellm  # noqa: E402

# Its "Give Feedback / Get Help" banner goes to stdout on every error; our errors say enough.
litellm.suppress_debug_info = True
# Used through its public API only: nothing of litellm, openai or httpx is replaced (their per-call
# work is spread over LLM worker processes instead: agents/llm/worker.py, `llm_workers`).

__all__ = ["litellm"]
