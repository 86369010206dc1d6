"""`export --format inspect`: a real sweep's cells as Inspect AI eval logs, read back with inspect_ai's
own reader and checked against the store; without inspect_ai, one line saying how to install it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path


from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, Store, TurnRecord


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
    from inspect_ai.log import read_eval_log

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
