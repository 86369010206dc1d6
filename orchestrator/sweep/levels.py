"""Run a sweep: its five levels, one inside the other, each in a module of its own.

    summary = await run_sweep(config, sweep_hash, progress=progress, data_dir=data_dir)

1. `inputs.py`: the task sets resolved, the models checked, your agents found, the episodes
   planned. Everything the file names is checked before anything is claimed.
2. `stored_run.py`: the store opened (its directory lock held), what it holds skipped, this run
   recorded with its status at the end.
3. `sweep_models.py`: the models (offline servers, the LLM client and its budget), and the gateway
   your agents' SDK clients reach.
4. `placing.py`: the images built, then the site: this machine (`local_site.py`) or a cluster's hosts.
5. `workers.py`: `concurrency` workers over the fair queue, each storing its episode as it ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.sweep.config import SweepConfig
from orchestrator.sweep.own_agents import gateway_folder, serving
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.placing import open_site, place
from orchestrator.sweep.stored_run import StoredRun, stored_run
from orchestrator.sweep.sweep_models import SweepModels
from orchestrator.sweep.inputs import SweepInputs, prepare
from orchestrator.sweep.workers import run_workers


@dataclass(frozen=True)
class SweepSummary:
    planned: int
    skipped: int  # already stored by an earlier run
    ran: int
    not_started: int  # left for a resume (the budget ran out)
    run_id: int


async def run_sweep(config: SweepConfig, sweep_hash: str, *, progress: SweepProgress,
                    data_dir: Path | None) -> SweepSummary:
    inputs = await prepare(config, data_dir)
    async with stored_run(config, inputs, sweep_hash, progress) as run:
        if run.todo:
            run.left = await _below_the_store(config, inputs, run, progress, data_dir)
    planned, todo = len(inputs.episodes), len(run.todo)
    return SweepSummary(planned, planned - todo, todo - run.left, run.left, run.run_id)


async def _below_the_store(config: SweepConfig, inputs: SweepInputs, run: StoredRun, progress: SweepProgress,
                           data_dir: Path | None) -> int:
    """Levels 3 to 5; the episodes left for a resume."""
    with gateway_folder(inputs.your_agents) as folder:
        placement = await place(config, run.todo, inputs.task_sets, data_dir, inputs.your_agents, folder)
        async with SweepModels.open(config, inputs.tasks, data_dir, run.spent_before) as models, serving(inputs.your_agents, folder):
            async with open_site(config, placement, models, progress, run.run_id, data_dir) as (site, capacity):
                return await run_workers(config, placement.todo, site, capacity, models, run, progress)
