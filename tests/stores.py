"""Results stores in tests (and benchmarks): rows of a query, the file closed after; small stores
written by the sweep's own writer, with transcripts or without."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from agents.strategies.turns import Dialogue, clip, prompt
from environments.kind import kind_spec
from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord
from orchestrator.store.transcript import Transcript

BASH = kind_spec("bash")  # the kind whose prompts the stored episodes use


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


def dialogue_record(task: int, rewards: list[float], *, model: str = "openai/sim", strategy: str = "try_again",
                    task_set: str = "starter-bash", status: str = "max_turns", epoch: int = 0,
                    words: str = "", flags: str = "") -> EpisodeRecord:
    """A Try Again episode as the sweep stores it with its transcript: the strategy's own prompts
    and window, one LLM call per turn, each turn's observation (with `words` in the last one) and
    the Bash reward's breakdown; `flags` go into each `ls` (and show a hidden file)."""
    system = prompt("system", BASH, reward_note=", with a reward between 0 and 1")
    query = f"Count the files under /starter/data{task} <b>"
    talk = Dialogue([{"role": "system", "content": system},
                     {"role": "user", "content": prompt("query", BASH, query=query)}], 2)
    transcript, turns, calls = Transcript(), [], []
    for k, reward in enumerate(rewards):
        action = f"ls {flags}/starter/data{task} | head -{k + 1}"
        output = f"Thought {k + 1}: look first.\n```bash\n{action}\n```"
        transcript.record(talk.window(), {"role": "assistant", "content": output}, None, {"finish_reason": "stop"})
        talk.add("assistant", output)
        seen = f"file{k}.txt\n{'.hidden' + chr(10) if flags else ''}notes{task}.md" + (
            f"\n{words}" if words and k == len(rewards) - 1 else "")
        turns.append(TurnRecord(output, action, seen, reward, k % 3 != 2,
                                {"file_changes": 0.33, "file_contents": round(reward / 3, 2), "output_similarity": 0.1}))
        calls.append(LLMCall(model, f"{model}-0613", 300 + 40 * k, 25, 0.2 + k / 10, 1, 0.0004))
        talk.add("user", prompt("observation", BASH, observation=clip(seen), reward_line=f"Reward: {reward}\n",
                                query=query))
    now = time.time()
    return EpisodeRecord(EpisodeKey(model, strategy, task_set, f"{task_set}/{task}", epoch), "bash", task_set, task,
                         query, f"ls /starter/data{task} | wc -l", "intercode/starter", len(rewards) + 2, now - 2, now,
                         status, turns=turns, calls=calls, transcript=transcript)


def transcript_store(outdir: Path, sweep: str, records: list[EpisodeRecord]) -> Path:
    """OUTDIR/results.db written by the sweep's own writer with these episodes, its run finished."""
    asyncio.run(write_episodes(outdir, sweep, records))
    return outdir


async def write_episodes(outdir: Path, sweep: str, records: list[EpisodeRecord], *, finished: bool = True) -> None:
    async with Store.open(outdir, sweep=sweep, identity=f"{sweep}-id") as store:
        run = await store.start_run(sweep=sweep, identity=f"{sweep}-id", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        for record in records:
            await store.add_episode(run, sweep, record)
        if finished:
            await store.finish_run(run, "finished")
