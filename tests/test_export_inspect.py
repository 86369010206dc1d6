"""`export --format inspect`: a real sweep's cells as Inspect AI eval logs, read back with inspect_ai's
own reader and checked against the store; without inspect_ai, one line saying how to install it."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log, resolve_sample_attachments

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord
from orchestrator.store.transcript import decode
from tests.stores import rows

SWEEP = """name = "inspect-export"
output = "{output}"
strategies = ["single", "try_again"]
epochs = 2
max_turns = 2
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = {{ solve_rate = 0.5, seed = 1 }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-sql"
"""


def stored(outdir: Path) -> dict[tuple[str, str, str], list[tuple]]:
    """The store's episodes per cell: (task_id, epoch, reward, success, status, tokens, image_digest)."""
    found = rows(outdir, "SELECT model, strategy, task_set, task_id, epoch, reward, success, status, "
                         "prompt_tokens + completion_tokens, image_digest FROM episodes")
    cells: dict[tuple[str, str, str], list[tuple]] = {}
    for model, strategy, task_set, *episode in found:
        cells.setdefault((model, strategy, task_set), []).append(tuple(episode))
    return cells


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("inspect")
    sweep = root / "sweep.toml"
    sweep.write_text(SWEEP.format(output=root / "out"))
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    assert main(["export", str(root / "out"), "--format", "inspect", "--to", str(root / "logs")]) == 0
    return root / "out", root / "logs"


@pytest.mark.docker
def test_each_cell_is_a_log_whose_samples_and_scores_are_the_stores(exported):
    outdir, logs = exported
    cells = stored(outdir)
    # the files `inspect view` lists
    files = sorted(Path(info.name.removeprefix("file://")) for info in list_eval_logs(str(logs)))
    assert len(files) == len(cells) == 2 * 2 * 2
    seen, task_ids = set(), set()
    for file in files:
        log = read_eval_log(str(file))
        task_ids.add(log.eval.task_id)
        sweep_model = log.eval.metadata["model"]
        cell = (sweep_model, log.eval.solver, log.eval.task)
        episodes = cells[cell]
        seen.add(cell)
        assert log.status == "success" and log.eval.model == {"oracle": "none/oracle"}.get(sweep_model, sweep_model)
        assert len(log.samples) == len(episodes) == 5 * 2  # five tasks, two epochs
        by_id = {(task_id, epoch + 1): rest for task_id, epoch, *rest in episodes}
        for sample in log.samples:
            reward, success, status, tokens, digest = by_id.pop((sample.id, sample.epoch))
            assert sample.scores["reward"].value == reward
            assert sample.scores["success"].value == success
            assert (sample.metadata["status"], sample.metadata["image_digest"]) == (status, digest)
            assert sum(u.total_tokens for u in sample.model_usage.values()) == tokens
        assert by_id == {}
        success, reward = log.results.scores
        assert success.metrics["accuracy"].value == pytest.approx(sum(e[3] for e in episodes) / len(episodes))
        assert reward.metrics["mean"].value == pytest.approx(sum(e[2] for e in episodes) / len(episodes))
        if sweep_model == "oracle":
            assert success.metrics["accuracy"].value == 1.0
    assert seen == set(cells)
    assert len(task_ids) == len(files)  # `inspect view` lists only the last log of a task_id, the rest as retries
    rates = {cell: sum(e[3] for e in episodes) / len(episodes) for cell, episodes in cells.items()}
    assert 0 < min(rates.values()) < 1 == max(rates.values()), rates  # the simulated model fails some: not all 1.0


@pytest.mark.docker
def test_a_sample_holds_the_transcript_and_every_call_as_a_model_event(exported):
    outdir, logs = exported
    log = read_eval_log(str(logs / "openai-sim__try_again__starter-sql.eval"))
    db = sqlite3.connect(outdir / "results.db")
    try:
        for stored in log.samples:
            sample = resolve_sample_attachments(stored, "full")  # the log keeps a long text once, as an attachment
            body, fmt, eid = db.execute(
                "SELECT t.body, t.format, e.id FROM transcripts t JOIN episodes e ON e.id = t.episode_id WHERE "
                "e.model = 'openai/sim' AND e.strategy = 'try_again' AND e.task_set = 'starter-sql' AND e.task_id = ? "
                "AND e.epoch = ?", (sample.id, sample.epoch - 1)).fetchone()
            turns = db.execute("SELECT action, reward FROM turns WHERE episode_id = ? ORDER BY idx", (eid,)).fetchall()
            calls = decode(body, fmt).calls
            events = [e for e in sample.events if e.event == "model"]
            assert [[(m.role, m.text) for m in e.input] for e in events] == [
                [(m["role"], m["content"]) for m in c.sent] for c in calls]  # what each call sent, as it was
            assert [e.output.message.text for e in events] == [c.answer["content"] for c in calls]
            assert sample.messages[0].role == "system" and sample.messages[1].text == calls[0].sent[1]["content"]
            answers = [m for m in sample.messages if m.role == "assistant"]
            assert [t["action"] for m in answers for t in (m.metadata or {}).get("turns", [])] == [a for a, _ in turns]
    finally:
        db.close()


def test_without_inspect_ai_the_export_says_how_to_install_it(tmp_path):
    script = ("import sys; sys.modules['inspect_ai'] = None; from orchestrator.cli import main; "
              f"sys.exit(main(['export', {str(tmp_path)!r}, '--format', 'inspect']))")
    result = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("error: --format inspect needs inspect_ai, an optional extra: "
                             "pip install 'intercode-orchestrator[inspect]'\n")


def test_a_directory_without_a_store_is_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--format", "inspect"]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path} has no results.db: run `python -m orchestrator sweep FILE` first\n"


def record(model: str, index: int, status: str, reward: float, failure: str | None = None,
           actions: tuple[str | None, ...] = (None,)) -> EpisodeRecord:
    """An episode of starter-bash as the sweep stores it, a turn per action and, for an LLM, one call."""
    calls = [] if model.startswith("replay:") else [LLMCall(model, "served-x", 100, 20, 0.5, 1, None)]
    return EpisodeRecord(EpisodeKey(model, "single", "starter-bash", f"starter-bash/{index}", 0), env="bash",
                         dataset="starter-bash", task_index=index, query=f"q{index}", gold=f"g{index}", image="img",
                         max_turns=3, started_at=1_700_000_000.0, finished_at=1_700_000_002.0, status=status,
                         failure_class=failure, error=f"{status} happened" if failure else None,
                         turns=[TurnRecord("answer", a, "no code in that", reward, False) for a in actions], calls=calls)


async def store_of(outdir: Path, episodes: list[EpisodeRecord], run_status: str) -> None:
    async with Store.open(outdir, sweep="s", identity="i") as store:
        run = await store.start_run(sweep="s", identity="i", sweep_hash="h", git_sha=None, config_json="{}")
        for episode in episodes:
            await store.add_episode(run, "s", episode)
        await store.finish_run(run, run_status)


def test_infra_failures_cut_episodes_and_an_interrupted_run_are_as_the_report_counts_them(tmp_path):
    episodes = [record("gpt-x", 0, "solved", 1.0), record("gpt-x", 1, "infra_error", 0.0, "infra"),
                record("gpt-x", 2, "budget_exhausted", 1.0), record("replay:/t/f.json", 0, "submitted", 0.5, actions=("ls", "submit"))]
    asyncio.run(store_of(tmp_path / "out", episodes, "interrupted"))
    assert main(["export", str(tmp_path / "out"), "--format", "inspect", "--to", str(tmp_path / "logs")]) == 0
    llm = read_eval_log(str(tmp_path / "logs" / "gpt-x__single__starter-bash.eval"))
    assert (llm.status, llm.eval.model, llm.eval.metadata["model"]) == ("cancelled", "litellm/gpt-x", "gpt-x")
    solved, infra, cut = llm.samples
    assert solved.scores["success"].value == 1.0 and solved.error is None
    assert (infra.scores["success"].value, infra.error.message) == (0.0, "infra_error happened")  # a failure, counted
    assert cut.scores is None and cut.metadata["status"] == "budget_exhausted"  # incomplete: in no rate
    assert [(name, m.value) for s in llm.results.scores for name, m in s.metrics.items()] == [
        ("accuracy", 0.5), ("mean", 0.5)]  # over the solved and the infra failure; the cut one is in neither
    assert (llm.results.total_samples, llm.results.completed_samples) == (3, 2)
    assert solved.model_usage["litellm/gpt-x"].total_tokens == 120
    assert llm.stats.model_usage["litellm/gpt-x"].input_tokens == 300  # the log's: the episodes' sum
    assert [m.role for m in solved.messages] == ["user", "assistant", "user"]  # no action: the observation is the user's
    replay = read_eval_log(str(tmp_path / "logs" / "replay-t-f.json__single__starter-bash.eval"))
    sample, = replay.samples
    assert (replay.eval.model, sample.scores["reward"].value, sample.model_usage) == ("none/replay", 0.5, {})
    assert sample.scores["success"].answer == "ls"  # the first turn with the best reward, not the closing submit
    assert [m.role for m in sample.messages] == ["user", "assistant", "tool", "assistant", "tool"]
