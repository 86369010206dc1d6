"""Results stores in tests (and benchmarks): rows of a query, the file closed after; a small store
written by the sweep's own writer."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from orchestrator.store import EpisodeKey, EpisodeRecord, Store, TurnRecord


def rows(outdir: Path, sql: str, args: tuple = ()) -> list[tuple]:
    """The rows `sql` selects from OUTDIR/results.db."""
    with closing(sqlite3.connect(outdir / "results.db")) as db:
        return db.execute(sql, args).fetchall()


def written_store(outdir: Path, episodes: int = 4, *, sweep: str = "written") -> Path:
    """OUTDIR/results.db made by the sweep's own writer (WAL mode, closed as a sweep closes it):
    `episodes` Bash episodes of one cell, every other one solved. Returns OUTDIR."""
    asyncio.run(_write(outdir, episodes, sweep))
    return outdir


async def _write(outdir: Path, episodes: int, sweep: str) -> None:
    async with Store.open(outdir, sweep=sweep, identity=f"{sweep}-id") as store:
        run = await store.start_run(sweep=sweep, identity=f"{sweep}-id", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for n in range(episodes):
            await store.add_episode(run, sweep, episode_record(n, solved=n % 2 == 0))
        await store.finish_run(run, "finished")


def episode_record(task: int, *, solved: bool) -> EpisodeRecord:
    """One Bash episode of one turn, as the sweep stores it."""
    now = time.time()
    reward = 1.0 if solved else 0.0
    turn = TurnRecord("```\nls\n```", "ls", "a.txt\n", reward, True)
    return EpisodeRecord(EpisodeKey("oracle", "single", "starter-bash", f"starter-bash/{task}", 0), "bash",
                         "starter-bash", task, f"query {task}", "ls", "intercode/starter", 1, now - 1, now,
                         "solved" if solved else "max_turns", turns=[turn])
