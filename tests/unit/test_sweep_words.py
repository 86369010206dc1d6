"""What the sweep tells its user about a store it resumes (issue 37): the closing summary counts
the whole store, and a store refused to a changed sweep names what changed. The sweep's first two
levels (its inputs, its store) run for real; no engine is reached."""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from pathlib import Path

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.store import EpisodeRecord, Store, TurnRecord
from orchestrator.sweep.config import load_sweep
from orchestrator.sweep.plan import PlannedEpisode
from orchestrator.sweep.progress import SweepProgress
from orchestrator.sweep.stored_run import stored_run
from orchestrator.sweep.inputs import prepare
from tests.stores import rows

STARTER = 'dataset = "starter-bash"\nlimit = 3'
OWN = 'path = "env"'


def sweep_file(tmp_path: Path, tasks: str, max_turns: int = 5) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "words"\noutput = "{tmp_path / "out"}"\nstrategies = ["single"]\nmax_turns = {max_turns}\n'
                    f'[[models]]\nname = "oracle"\n[[tasks]]\n{tasks}\n')
    return path


def record(episode: PlannedEpisode, *, solved: bool) -> EpisodeRecord:
    """The episode as the sweep stores it: solved, or ended by a task error."""
    task, now = episode.task, time.time()
    stored = EpisodeRecord(episode.key, task.kind, task.dataset, task.index, task.query, task.gold_text, task.image, 5,
                           now - 1, now, "submitted" if solved else "task_error",
                           turns=[TurnRecord("", task.gold_text, "", 1.0 if solved else 0.0, True)])
    if not solved:
        stored.failure_class, stored.error = "task", "TaskUnavailable: the task's files are gone"
    return stored


async def run_once(path: Path, outcomes: list[bool], progress: SweepProgress | None = None) -> SweepProgress:
    """One run of the sweep file's first two levels: its first episodes to do stored with these
    outcomes (solved or failed), as the workers store them; the rest left for a resume."""
    config, sweep_hash = load_sweep(path)
    inputs = await prepare(config, None)
    progress = progress or SweepProgress(quiet=True)
    async with stored_run(config, inputs, sweep_hash, progress) as run:
        for episode, solved in zip(run.todo, outcomes):
            progress.started(episode)
            stored = record(episode, solved=solved)
            await run.store.add_episode(run.run_id, config.name, stored)
            progress.finished(episode, stored)
        run.left = len(run.todo) - len(outcomes)
    return progress


# ------------------------------------------------------------------ the closing summary


async def test_after_a_resume_solved_and_failed_both_count_every_run(tmp_path):
    path = sweep_file(tmp_path, STARTER)
    await run_once(path, [True, False])  # the first run: one solved, one failed, one left
    summary = (await run_once(path, [False])).summary()  # the resume: the last one, failed too
    assert summary.startswith("3/3 episodes stored (1 this run")
    assert re.search(r"(\d+) solved, (\d+) failed", summary).groups() == ("1", "2"), summary
    assert "of the 3 stored, 1 solved, 2 failed" in summary  # the words say what they count
    stored = rows(tmp_path / "out", "SELECT sum(success), sum(failure_class IS NOT NULL) FROM episodes")
    assert stored == [(1, 2)]  # the store's own count


# ------------------------------------------------------------------ a refused resume


def own_environment(tmp_path: Path) -> Path:
    directory = tmp_path / "env"
    shutil.copytree(PROJECT_ROOT / "examples" / "own-task", directory)
    return directory


def refusal(path: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["sweep", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_a_changed_task_file_is_named_with_what_to_do(tmp_path, capsys):
    tasks = own_environment(tmp_path) / "tasks.jsonl"
    path = sweep_file(tmp_path, OWN)
    asyncio.run(run_once(path, []))
    tasks.write_text(tasks.read_text().replace("How many orders", "How many of the orders"))
    err = refusal(path, capsys)
    assert f"the file {tasks} of task set 'env' changed since its first run: restore it, or choose another " \
           "`output` in the sweep file (or give --output DIR) to start a new sweep" in err, err
    assert "sweep file changed" not in err and "restore the sweep file" not in err


def test_a_changed_sweep_file_is_named_as_such(tmp_path, capsys):
    own_environment(tmp_path)
    asyncio.run(run_once(sweep_file(tmp_path, OWN), []))
    err = refusal(sweep_file(tmp_path, OWN, max_turns=7), capsys)
    assert "holds results of a different sweep ('words'" in err
    assert ": the sweep file changed since its first run: restore it, or choose another `output`" in err, err


def test_a_store_from_before_the_parts_were_kept_gets_them_at_its_next_resume(tmp_path, capsys):
    tasks = own_environment(tmp_path) / "tasks.jsonl"
    path = sweep_file(tmp_path, OWN)
    config, _ = load_sweep(path)
    identity = asyncio.run(prepare(config, None)).identity

    async def as_before() -> None:  # the store as a sweep wrote it before: its identity alone
        async with Store.open(config.output, sweep=config.name, identity=identity):
            pass

    asyncio.run(as_before())
    assert rows(config.output, "SELECT count(*) FROM meta WHERE key = 'identity_parts'") == [(0,)]
    original = tasks.read_text()
    tasks.write_text(original + '{"query": "One more?", "gold": "jq length orders.json"}\n')
    assert "its sweep file, or a file its task sets or agents are read from, changed" in refusal(path, capsys)
    tasks.write_text(original)
    asyncio.run(run_once(path, []))  # resumed: the parts are kept from now on
    tasks.write_text(tasks.read_text().replace("How many orders", "How many of the orders"))
    assert f"the file {tasks} of task set 'env' changed" in refusal(path, capsys)
