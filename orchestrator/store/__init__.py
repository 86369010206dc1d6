"""The results store: one SQLite database per sweep output directory (schema.sql).

The sweep writes through `Store` (one writer thread, so the event loop never blocks on disk).
Every read is this package's too (an import-linter contract keeps sqlite3 out of the other parts):
`results` (everything a report and compare compute from), `export`, and for the viewer
`async_reader` (off the event loop) over `episode_query`, `search_index`, `episode_detail`,
`chart_data` and `episode_pairs`.
"""

from agents.recording import LLMCall
from orchestrator.store.records import EpisodeKey, EpisodeRecord, TurnRecord
from orchestrator.store.store import DB_NAME, Store, Stored, StoreFull

__all__ = ["DB_NAME", "EpisodeKey", "EpisodeRecord", "LLMCall", "Store", "Stored", "StoreFull", "TurnRecord"]
