"""The one place litellm is imported: the local cost map is forced first, so import never fetches it."""

from __future__ import annotations

import os
import warnings

# Before the import, always: litellm otherwise downloads its price map at import time.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# OpenAI-compatible chat calls go through litellm's own HTTP handler (the one its other providers
# use) rather than through the openai SDK: the same request and reply at about a fifth less CPU per
# call, which at a few hundred calls a second is what keeps the LLM worker off its ceiling
# (docs/benchmarks.md). litellm reads the switch on every call; set it to False to get the SDK back.
os.environ.setdefault("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "True")

# litellm's response types mark TypedDict items ReadOnly, which pydantic warns about (once, at the
# first response it builds); nothing is wrong with the reply, and the warning would only alarm.
warnings.filterwarnings("ignore", message=r"Item '\w+' on TypedDict class '\w+' is using the `ReadOnly` qualifier",
                        category=UserWarning)

import litellm  # noqa: E402

# Used through its public API only: nothing of litellm, openai, httpx or asyncio is assigned to, not
# even a setting (tests/unit/test_no_patching.py); their per-call work is spread over LLM worker processes
# instead (agents/llm/worker.py, `llm_workers`). litellm's "Give Feedback / Get Help" banner, which it
# prints on a mapped error, is dropped from the workers' output (transport.LITELLM_BANNER).

__all__ = ["litellm"]
