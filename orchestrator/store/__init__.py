"""The results store: one SQLite database per sweep output directory (schema.sql).

The sweep writes through `Store` (one writer thread, so the event loop never blocks on disk);
report, export and compare read the file directly.
"""

from orchestrator.store.records import EpisodeKey, EpisodeRecord, LLMCall, TurnRecord
from orchestrator.store.store import DB_NAME, Store, StoreFull

__all__ = ["DB_NAME", "EpisodeKey", "EpisodeRecord", "LLMCall", "Store", "StoreFull", "TurnRecord"]
