"""One sweep's output directory as the viewer shows it: its store's reader (orchestrator/store/
async_reader.py: read-only, off the event loop, checked once at start), the report's view of it
and its charts, and the episodes its sweep planned.

What is costly to compute over a whole store (the report's view, the charts) is cached under a
change token, so a page over a store that did not change does not read it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from foundation.concurrency import TaskOwner
from orchestrator.report.content import ReportContent, build_content
from orchestrator.store.async_reader import AsyncReader, checked_meta
from orchestrator.store.chart_data import CellCharts
from orchestrator.store.episode_query import CellProgress
from orchestrator.store.results import Results, load_results
from orchestrator.store.search_index import IndexKeeper
from orchestrator.view.sweeplog import PlannedEpisodes


@dataclass(frozen=True)
class Snapshot:
    """The report's view of a store as of one change token."""

    token: tuple[Any, ...]
    results: Results
    view: ReportContent
    charts: CellCharts | None = None  # drawn after the view, from every turn and call (None: not yet)
    charts_token: tuple[Any, ...] | None = None  # the store's state they are of


@dataclass(frozen=True)
class Overview:
    """The progress per cell as of `token`, and the report's view as of `snapshot.token`: the two
    differ for the second or so a large store's view takes to compute again after a change."""

    token: tuple[Any, ...]
    progress: list[CellProgress]
    snapshot: Snapshot
    planned: int | None  # episodes the sweep's latest run planned (sweep.log); None when unknown

    @property
    def current(self) -> bool:
        return self.snapshot.token == self.token == self.snapshot.charts_token


@dataclass
class Source:
    """A sweep's output directory, opened for reading; `index` is its place in the command line.

    The report's view is computed from the whole store (about a second at 100,000 episodes), so it
    is cached under the store's change token and computed again by one background task the Source
    owns (`aclose` ends it); the overview shows the last view meanwhile, with fresh progress.
    """

    index: int
    outdir: Path
    path: Path
    sweep: str
    label: str = ""  # the sweep's name, with its directory where another open store has the same name
    reader: AsyncReader = field(init=False, repr=False)  # its store's, and its text index's keeper
    _snapshot: Snapshot | None = None
    _refresh: asyncio.Task[Snapshot] | None = None
    _drawing: asyncio.Task[None] | None = None  # the charts of the latest view
    _progress: tuple[tuple[Any, ...], list[CellProgress]] | None = field(default=None, repr=False)
    _planned: PlannedEpisodes | None = field(default=None, repr=False)
    _tasks: TaskOwner = field(default_factory=lambda: TaskOwner("view"), repr=False)  # the refresh, the index

    def __post_init__(self) -> None:
        self.label = self.label or self.sweep
        self.reader = AsyncReader(self.path, IndexKeeper(self.path, self._tasks))

    @property
    def keeper(self) -> IndexKeeper:
        return self.reader.keeper

    @classmethod
    def open(cls, index: int, outdir: Path) -> Source:
        """Check OUTDIR once (blocking: call it before serving): a results database of a schema we
        read, not locked. Every problem is one ConfigError or StoreLocked line."""
        path, meta = checked_meta(outdir)
        return cls(index, outdir, path, meta.get("sweep") or outdir.name, _planned=PlannedEpisodes.of(outdir))

    async def token(self) -> tuple[Any, ...]:
        """Changes whenever an episode is stored (or replaced) or a run starts or ends; its last
        part is the latest run's status."""
        return await self.reader.token()

    async def overview(self) -> Overview:
        """Progress as of now; the report's view as of now, or while it is computed again, the last one."""
        token = await self.token()
        task = self._refresh_for(token)
        if self._snapshot is None and task is not None:
            await asyncio.shield(task)  # the first view: wait (shielded: a client leaving must not cancel it)
        assert self._snapshot is not None and self._planned is not None
        planned = await asyncio.to_thread(self._planned.read)
        return Overview(token, await self._progress_at(token), self._snapshot, planned)

    async def snapshot(self) -> Snapshot:
        """The report's view as of now, waiting for it when the store moved."""
        task = self._refresh_for(await self.token())
        if task is not None:
            await asyncio.shield(task)
        assert self._snapshot is not None
        return self._snapshot

    async def cells(self, token: tuple[Any, ...]) -> list[CellProgress]:
        """Each cell's progress as of `token` (the store's now), read again only when it moved."""
        return await self._progress_at(token)

    async def aclose(self) -> None:
        # The refresh, if one runs: its error, if it failed, was for a page nobody waits for any more.
        self.keeper.close()
        await self._tasks.aclose()

    def _refresh_for(self, token: tuple[Any, ...]) -> asyncio.Task[Snapshot] | None:
        """The task computing the view, started when the store moved and none runs; a failed one's
        error is raised here, once, for the page that asked (the next request tries again)."""
        task = self._refresh
        if task is not None and task.done():
            self._refresh = None
            task.result()
        elif task is not None:
            return task
        if self._snapshot is not None and self._snapshot.token == token:
            return None
        self._refresh = self._tasks.start(self._compute(token), name="refresh")
        return self._refresh

    async def _compute(self, token: tuple[Any, ...]) -> Snapshot:
        results = await asyncio.to_thread(load_results, self.outdir)
        view = await asyncio.to_thread(build_content, results)
        last = self._snapshot
        self._snapshot = Snapshot(token, results, view, last.charts if last else None, last.charts_token if last else None)
        self._draw()
        return self._snapshot

    def _draw(self) -> None:
        """The charts read every turn and call (seconds at 100,000 episodes): drawn in a task of their
        own after the view, so no page waits for them; the last ones are shown meanwhile."""
        if self._drawing is not None and not self._drawing.done():
            return
        self._drawing = self._tasks.spawn(self._charts(), name="charts")

    async def _charts(self) -> None:
        while self._snapshot is not None and self._snapshot.charts_token != self._snapshot.token:
            token = self._snapshot.token
            charts = await self.reader.charts()
            self._snapshot = replace(self._snapshot, charts=charts, charts_token=token)

    async def _progress_at(self, token: tuple[Any, ...]) -> list[CellProgress]:
        if self._progress is None or self._progress[0] != token:
            self._progress = (token, await self.reader.progress())
        return self._progress[1]


def token_text(token: tuple[Any, ...]) -> str:
    return ":".join(map(str, token))


def running(token: tuple[Any, ...]) -> bool:
    """Whether the store's latest run is going (its pages keep polling), by its change token."""
    return bool(token[-1] == "running")


def share_indexes(sources: Sequence[Source]) -> None:
    """A store opened twice (`view OUT OUT`) has one reader and so one text index, kept by its first Source."""
    first: dict[Path, Source] = {}
    for source in sources:
        source.reader = first.setdefault(source.path.resolve(), source).reader


def label_sources(sources: Sequence[Source]) -> None:
    """Stores of the same sweep name are told apart by their directories: the name, then the shortest
    end of each path that differs between them ("quickstart (night-2/out)")."""
    by_name: dict[str, list[Source]] = {}
    for source in sources:
        by_name.setdefault(source.sweep, []).append(source)
    for same in by_name.values():
        if len(same) < 2:
            continue
        parts = [source.outdir.resolve().parts for source in same]
        for depth in range(1, max(len(p) for p in parts) + 1):
            ends = ["/".join(p[-depth:]) for p in parts]
            if len(set(ends)) == len(ends):
                break
        if len(set(ends)) < len(ends):  # one directory opened twice
            ends = [f"{end} #{source.index}" for source, end in zip(same, ends, strict=True)]
        for source, end in zip(same, ends, strict=True):
            source.label = f"{source.sweep} ({end})"
