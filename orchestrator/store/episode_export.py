"""One stored episode as a file to download from its page: everything the store keeps of it as JSON,
or as an Inspect AI sample (the sample `export --format inspect` writes into its cell's log).

    body = episode_json(db, 12)      # None: no episode 12
    body = inspect_sample(db, 12)    # needs inspect_ai (the `inspect` extra); ConfigError without it
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from typing import Any

from foundation.errors import ConfigError
from orchestrator.store.episode_detail import episode_detail

FORMAT = 1  # the JSON's layout, in its `format` key


def episode_json(db: sqlite3.Connection, episode_id: int) -> str | None:
    """The episode's row, its run, its turns (with their timing), its LLM calls and its transcript
    (every message once, and per call the messages it sent, its tools and its answer)."""
    detail = episode_detail(db, episode_id)
    if detail is None:
        return None
    transcript: dict[str, Any] | None = None
    if detail.transcript is not None:
        messages = detail.transcript.messages
        number = {id(m): n for n, m in enumerate(messages)}
        transcript = {"messages": messages, "calls": [
            {"sent": [number.get(id(m)) for m in call.sent], "tools": call.tools, "answer": number.get(id(call.answer)),
             "extra": call.extra} for call in detail.transcript.calls]}
    body = {"format": FORMAT, "episode": detail.fields, "run": detail.run,
            "turns": [asdict(t) for t in detail.turns], "llm_calls": [asdict(c) for c in detail.calls],
            "transcript": transcript, "transcript_note": detail.transcript_note or None}
    return json.dumps(body, indent=1, default=str)


def inspect_sample(db: sqlite3.Connection, episode_id: int) -> str | None:
    """The episode as an Inspect sample (JSON, as inspect_ai writes one into an eval log)."""
    try:
        from orchestrator.store.inspect_log import episode_sample  # inspect_ai: an optional extra
    except ImportError:
        raise ConfigError("an Inspect sample needs inspect_ai: install the extra "
                          "(pip install 'intercode-orchestrator[inspect]'), or download the JSON") from None
    sample = episode_sample(db, episode_id)
    return None if sample is None else sample.model_dump_json(indent=1, exclude_none=True)
