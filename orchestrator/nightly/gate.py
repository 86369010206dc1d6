"""The oracle gate: before judging a model, check that every task's gold still scores 1.0.

When an image drifts (a package upgraded, a file moved) a task can become unsolvable; every
model then "regresses" on it at once. Running the gold first tells the two apart: a task whose
gold fails is quarantined and reported as broken, and no model is blamed for it.

The gate always scores in `strict` mode: `original` mode compares a failing gold with itself
(InterCode's rule), so it would pass a broken gold and hide exactly what the gate looks for.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.store.results import StoredEpisode, load_results
from orchestrator.sweep.config import ModelConfig, SweepConfig
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.levels import run_sweep

GATE_DIR = "oracle-gate"


@dataclass(frozen=True)
class GateResult:
    checked: int  # tasks whose gold ran
    broken: dict[tuple[str, str], str]  # (task_set, task_id) -> why
    outdir: Path


def gate_config(config: SweepConfig, outdir: Path) -> SweepConfig:
    """The sweep's task sets, run once by the gold ("oracle", single turn, strict scoring)."""
    gate = SweepConfig(
        name=f"{config.name}-oracle-gate", output=outdir, models=[ModelConfig(name="oracle")],
        strategies=["single"], tasks=config.tasks, epochs=1, max_turns=1, concurrency=config.concurrency,
        episode_timeout=config.episode_timeout, infra_retries=config.infra_retries, reward_mode="strict",
        data_dir=config.data_dir, pools=config.pools)
    gate._base_dir = config.base_dir  # the tasks' relative paths start where the sweep file is
    return gate


async def run_gate(config: SweepConfig, night_dir: Path, *, data_dir: Path | None,
                   progress: SweepProgress | None = None) -> GateResult:
    """Run the gold of every task of the sweep into NIGHT_DIR/oracle-gate; returns the broken tasks."""
    gate = gate_config(config, night_dir / GATE_DIR)
    digest = hashlib.sha256(gate.model_dump_json().encode()).hexdigest()
    await run_sweep(gate, digest, progress=progress or SweepProgress(quiet=True), data_dir=data_dir)
    results = await asyncio.to_thread(load_results, gate.output)
    return GateResult(len(results.episodes), broken_tasks(results.episodes), gate.output)


def broken_tasks(episodes: Iterable[StoredEpisode]) -> dict[tuple[str, str], str]:
    """Tasks whose gold did not score 1.0, with a one-line reason."""
    broken = {}
    for e in episodes:
        if e.reward < 1.0:
            why = f"gold scored {e.reward:.2f} ({e.status}"
            broken[e.task_set, e.task_id] = why + (f", {e.failure_class} failure)" if e.failure_class else ")")
    return broken
