"""Each turn's timing is recorded as it is made, not matched afterwards: when it began, how long it
took, the spans that made it (model call, action, scoring) and the call whose answer it is. On a
local sandbox (no engine), through the sweep's own recording of calls and its runner's records."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agents.base import get_strategy
from agents.recording import EpisodeCalls, Transcript
from tests.scripted import ScriptedModel, called
from environments import make_environment
from environments.runtime import Runtime
from foundation.local import LocalProvider
from foundation.timeline import Timeline, span
from orchestrator.store import EpisodeRecord, Store
from orchestrator.store.episode_detail import episode_detail
from orchestrator.store.records import EpisodeKey
from orchestrator.sweep.runner import _fill
from tasks import Task

IMAGE = "local/notes"
SEED = {"notes/a.txt": "alpha\nbeta\n"}
GOLD = Task(kind="bash", dataset="local-notes", index=0, query="How many lines hold an a?",
            gold="grep -c a notes/a.txt", image=IMAGE)


@pytest.fixture
async def runtime():
    async with Runtime.local(LocalProvider({IMAGE: SEED})) as runtime:
        yield runtime


async def test_try_again_turns_carry_their_call_and_spans(runtime):
    model = ScriptedModel(["```bash\nwc -l notes/a.txt\n```", "no code here", "```bash\ngrep -c a notes/a.txt\n```"])
    transcript = Transcript()
    timeline = Timeline()
    async with make_environment("bash", runtime) as env:
        with timeline.current(), EpisodeCalls(transcript=transcript).current():
            outcome = await get_strategy("try_again_fenced").run(env, GOLD, model, max_turns=5)
    timings = [turn.timing for turn in outcome.turns]
    assert all(t is not None for t in timings)
    assert [t.call for t in timings if t] == [0, 1, 2], "each turn is its own call's answer"
    kinds = [[s.kind for s in t.spans] for t in timings if t]
    assert kinds[0][0] == "call" and set(kinds[0]) == {"call", "action", "reward"}, kinds
    assert kinds[1] == ["call"], "a turn without code runs nothing"
    starts = [t.start for t in timings if t]
    assert all(a is not None and b is not None and a <= b for a, b in zip(starts, starts[1:])), starts
    assert all(t.duration is not None and t.duration >= 0 for t in timings if t)
    assert len(transcript.calls) == 3  # the numbers are the transcript's calls


async def test_a_tools_answer_of_two_calls_makes_two_turns_of_one_call(runtime):
    answers = [called(("bash", {"command": "wc -l notes/a.txt"}), ("bash", {"command": "grep -c a notes/a.txt"})),
               called(("submit", {}))]
    timeline = Timeline()
    async with make_environment("bash", runtime) as env:
        with timeline.current(), EpisodeCalls(transcript=Transcript()).current():
            outcome = await get_strategy("tools").run(env, GOLD, ScriptedModel(answers), max_turns=4)
    calls = [turn.timing.call for turn in outcome.turns if turn.timing]
    assert calls[:2] == [0, 0], calls


def test_outside_an_episode_nothing_is_recorded():
    with span("action"):
        pass
    from agents.base import Turn
    assert Turn("x", "ls", "", 0.0, True).timing is None


async def test_the_runner_stores_each_turns_timing_and_the_viewer_reads_it_back(runtime, tmp_path: Path):
    model = ScriptedModel(["```bash\nwc -l notes/a.txt\n```", "```bash\ngrep -c a notes/a.txt\n```"])
    record = EpisodeRecord(EpisodeKey("scripted", "try_again", "notes", GOLD.id, 0), "bash", GOLD.dataset, 0,
                           GOLD.query, GOLD.gold_text, IMAGE, 5, started_at=Timeline().origin)
    async with make_environment("bash", runtime) as env:
        with Timeline(record.started_at).current(), EpisodeCalls(transcript=Transcript()).current():
            outcome = await get_strategy("try_again").run(env, GOLD, model, max_turns=5)
    _fill(record, outcome)
    async with Store.open(tmp_path, sweep="timing", identity="x") as store:
        run_id = await store.start_run(sweep="timing", identity="x", sweep_hash="", git_sha=None, config_json="{}")
        await store.add_episode(run_id, "timing", record)
    db = sqlite3.connect(tmp_path / "results.db")
    stored = db.execute("SELECT started_s, duration_s, call_idx, spans FROM turns ORDER BY idx").fetchall()
    assert [row[2] for row in stored] == [0, 1]
    assert all(row[0] is not None and row[0] >= 0 and row[1] is not None and row[1] >= 0 for row in stored)
    assert [s[0] for s in json.loads(stored[0][3])][0] == "call"
    detail = episode_detail(db, 1)
    assert detail is not None and [t.call for t in detail.turns] == [0, 1]
    assert detail.turns[1].spans and {s[0] for s in detail.turns[1].spans} == {"call", "action", "reward"}
    assert [t.rewritten for t in detail.turns] == ["wc -l notes/a.txt", "grep -c a notes/a.txt"]


async def test_an_answer_the_paper_s_parser_rewrote_is_marked_with_what_the_dialogue_kept(runtime):
    model = ScriptedModel(["```bash\nwc -l notes/a.txt\n```", "grep -c a notes/a.txt"])
    async with make_environment("bash", runtime) as env:
        outcome = await get_strategy("try_again").run(env, GOLD, model, max_turns=5)  # the paper's rules
    first, second = outcome.turns
    assert first.output.startswith("```") and first.rewritten == "wc -l notes/a.txt"
    assert second.rewritten is None, "an answer the dialogue kept as it was is not marked"
