"""The sweep's second level: its store, and this run in it.

The store is opened (its directory lock held), the episodes it already holds are skipped, what
its earlier runs spent is read (a budget holds across resumes), and the run is recorded with its
status at the end: finished, stopped (the budget ran out), interrupted (a cancellation, an engine
gone: a resume finishes it) or failed.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from foundation.errors import EngineUnavailable
from foundation.settings import PROJECT_ROOT
from orchestrator.store import Store
from orchestrator.store.store import config_json
from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.plan import PlannedEpisode
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.inputs import SweepInputs

log = structlog.get_logger(__name__)


@dataclass
class StoredRun:
    store: Store
    run_id: int
    todo: list[PlannedEpisode]  # the episodes the store does not hold yet
    spent_before: tuple[float, int]  # what the sweep's earlier runs spent (dollars, tokens): a budget holds across resumes
    left: int = 0  # of `todo`, those left for a resume (the budget ran out): set by the levels below


@asynccontextmanager
async def stored_run(config: SweepConfig, inputs: SweepInputs, sweep_hash: str,
                     progress: SweepProgress) -> AsyncIterator[StoredRun]:
    async with Store.open(config.output, sweep=config.name, identity=inputs.identity, parts=inputs.parts) as store:
        done = await store.finished_keys()
        todo = [e for e in inputs.episodes if e.key not in done]
        progress.plan(inputs.episodes, done)
        run_id = await store.start_run(sweep=config.name, identity=inputs.identity, sweep_hash=sweep_hash,
                                       git_sha=await _git_sha(), config_json=config_json(config))
        log.info("sweep_start", sweep=config.name, run=run_id, planned=len(inputs.episodes),
                 skipped=len(inputs.episodes) - len(todo))
        status = "failed"
        try:  # from here on the run is recorded with its status, whatever stops it
            run = StoredRun(store, run_id, todo, await store.spent_before(run_id))
            yield run
            status = "finished" if run.left == 0 else "stopped"
        except (asyncio.CancelledError, EngineUnavailable):  # a resume finishes it
            status = "interrupted"
            raise
        finally:
            await asyncio.shield(store.finish_run(run_id, status))
            log.info("sweep_end", sweep=config.name, run=run_id, status=status)


async def _git_sha() -> str | None:
    """The project's commit (with '+dirty' if the checkout has changes), or None outside git."""
    def read() -> str | None:
        try:
            sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                                   capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        return f"{sha}+dirty" if dirty else sha
    return await asyncio.to_thread(read)
