"""The one place litellm is imported: the local cost map is forced first, so import never fetches it."""

from __future__ import annotations

import os

# Before the import, always: litellm otherwise downloads its price map at import time.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import litellm  # noqa: E402

# Its "Give Feedback / Get Help" banner goes to stdout on every error; our errors say enough.
litellm.suppress_debug_info = True

from ._openai_fast import install  # noqa: E402

install()  # openai/* calls skip the SDK's per-message type walk (see _openai_fast)

__all__ = ["litellm"]
