"""What a sweep shows while it runs: one row per model × task set.

Each row: episodes done of total, successes so far, episodes per second (this run), episodes in
flight, infrastructure re-runs, the model's LLM calls waiting on limits or backing off, and cost.
`--quiet` shows nothing until the final summary line; the log file has every event either way.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.table import Table

from orchestrator.store import EpisodeKey, EpisodeRecord, Stored

if TYPE_CHECKING:
    from agents.llm import LLMClient
    from environments.runtime import Runtime
    from orchestrator.sweep.plan import PlannedEpisode


@dataclass
class Row:
    total: int = 0
    done: int = 0
    done_now: int = 0  # finished by this run
    success: int = 0
    in_flight: int = 0
    reruns: int = 0
    failed: int = 0  # of `done`: stored with a failure class (a task error, a timeout, ...)
    cost: float = 0.0
    calls: int = 0
    unpriced: int = 0


class SweepProgress:
    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.rows: dict[tuple[str, str], Row] = collections.defaultdict(Row)
        self.started_at = time.monotonic()
        self._client: LLMClient | None = None
        self._runtime: Runtime | None = None

    def plan(self, episodes: Iterable[PlannedEpisode], done: Mapping[EpisodeKey, Stored]) -> None:
        """Count the planned episodes, and those an earlier run stored (`done`: how each ended), so
        that done, solved and failed count the whole store, every run. Stored infra failures and
        episodes cut by the budget are not in `done`: they count as to do, since this run runs them
        again."""
        for episode in episodes:
            row = self.rows[(episode.key.model, episode.key.task_set)]
            row.total += 1
            stored = done.get(episode.key)
            if stored is not None:
                row.done += 1
                row.success += stored.success
                row.failed += stored.failed
        self.started_at = time.monotonic()

    def warmed(self) -> None:
        """The pools are warm and the episodes start: episodes/s count from here."""
        self.started_at = time.monotonic()

    def attach(self, client: LLMClient, runtime: Runtime | None) -> None:
        """The LLM client and this machine's runtime (None: the episodes run on a cluster's hosts)."""
        self._client, self._runtime = client, runtime

    def started(self, episode: PlannedEpisode) -> None:
        self.rows[(episode.key.model, episode.key.task_set)].in_flight += 1

    def retried(self, episode: PlannedEpisode, reason: str) -> None:
        self.rows[(episode.key.model, episode.key.task_set)].reruns += 1

    def finished(self, episode: PlannedEpisode, record: EpisodeRecord) -> None:
        row = self.rows[(episode.key.model, episode.key.task_set)]
        row.in_flight -= 1
        row.done += 1
        row.done_now += 1
        row.success += record.success
        row.failed += record.failure_class is not None
        cost = record.cost_usd
        row.cost += cost or 0.0
        row.calls += len(record.calls)
        row.unpriced += sum(1 for c in record.calls if c.cost_usd is None)

    # ------------------------------------------------------------------ display

    @contextmanager
    def live(self) -> Iterator[None]:
        if self.quiet or not self.console.is_terminal:
            yield
            return
        with Live(self.table(), console=self.console, refresh_per_second=2, transient=False,
                  get_renderable=self.table):
            yield

    def table(self) -> Table:
        elapsed = max(time.monotonic() - self.started_at, 1e-9)
        table = Table(title=f"sweep: {elapsed:.0f} s{self._engine_note()}", title_justify="left")
        for header in ("model", "task set", "done", "success", "eps/s", "running", "re-runs", "llm wait/retry", "cost"):
            table.add_column(header, justify="left" if header in ("model", "task set") else "right")
        for (model, task_set), row in sorted(self.rows.items()):
            stats = self._client.stats(model) if self._client and "/" in model else None
            waiting = f"{stats.waiting}/{stats.retries}" if stats else "-"
            cost = _cost(row)
            success = f"{row.success} ({100 * row.success / row.done:.0f}%)" if row.done else "-"
            table.add_row(model, task_set, f"{row.done}/{row.total}", success, f"{row.done_now / elapsed:.1f}",
                          str(row.in_flight), str(row.reruns), waiting, cost)
        return table

    def _engine_note(self) -> str:
        watch = self._runtime.watch if self._runtime is not None else None
        if watch is None or watch.down_since is None:
            return ""
        away = time.monotonic() - watch.down_since
        return f" — the Docker engine is away ({away:.0f} s of {watch.limit:g} s): waiting for it"

    def summary(self) -> str:
        done = sum(r.done for r in self.rows.values())
        total = sum(r.total for r in self.rows.values())
        success = sum(r.success for r in self.rows.values())
        now = sum(r.done_now for r in self.rows.values())
        failed = sum(r.failed for r in self.rows.values())
        elapsed = time.monotonic() - self.started_at
        watch = self._runtime.watch if self._runtime is not None else None
        away = (f"; the Docker engine went away {_times(watch.outages)}, episodes re-run"
                if watch and watch.outages else "")
        return (f"{done}/{total} episodes stored ({now} this run in {elapsed:.1f} s, "
                f"{now / max(elapsed, 1e-9):.1f}/s); of the {done} stored, {success} solved, {failed} failed{away}")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _cost(row: Row) -> str:
    """Dollars so far; calls litellm could not price are counted apart ("?"), never as free."""
    if row.calls == 0:
        return "-"
    if row.unpriced == row.calls:
        return f"? ({row.calls} calls)"
    return f"${row.cost:.4f}" + (f" +{row.unpriced}?" if row.unpriced else "")
