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

from . import _litellm_lean, _openai_fast  # noqa: E402

_openai_fast.install()  # with the switch off, the SDK path skips its per-message type walk (see _openai_fast)
# No success logging without callbacks, no re-pricing or re-lookup of unmapped models, no empty cookie jars.
_litellm_lean.install()

__all__ = ["litellm"]
