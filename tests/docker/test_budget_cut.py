"""Episodes cut short by the budget: incomplete, not failures. Reports and comparisons leave them
out of every rate and mean and count them apart; a resume with a larger budget runs them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.report.summary import summarize_all
from orchestrator.store.results import load_results
from tests.stores import rows
from tests.unit.test_budget_cut import sweep

# ------------------------------------------------------------------ a real sweep, cut and resumed

Key = tuple[str, str, str, str, int]


def sweep_file(tmp_path: Path, output: Path, budget_tokens: int | None) -> Path:
    """Seeded local model: it knows half the tasks (one call, solved); for the rest it answers `ls`
    every turn, a partial reward (0.39-0.67 on Bash) over three calls, so a spent budget cuts
    those mid-episode, after their first turn."""
    top = {"name": "cut", "output": str(output), "strategies": ["try_again"], "max_turns": 3, "concurrency": 6,
           "llm_workers": 0}
    budget = f"budget = {{ tokens = {budget_tokens} }}\n" if budget_tokens else ""
    path = tmp_path / f"cut-{budget_tokens}.toml"
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in top.items()) + budget
                    + '[[models]]\nname = "openai/sim"\n'
                    + 'local = { latency = 0.2, solve_rate = 0.5, seed = 1, default_answer = "```\\nls\\n```" }\n'
                    + '[[tasks]]\ndataset = "starter-bash"\n[[tasks]]\ndataset = "starter-sql"\n')
    return path


def stored(outdir: Path) -> dict[Key, tuple]:
    """Key -> (row id, run id, status, success, reward, turns); asserts one row per key."""
    found = rows(outdir, "SELECT model, strategy, task_set, task_id, epoch, id, run_id, status, success, reward, "
                         "n_turns FROM episodes")
    by_key = {row[:5]: row[5:] for row in found}
    assert len(by_key) == len(found), "one row per episode"
    return by_key


def run_spend(outdir: Path) -> list[tuple[float, int]]:
    """Each run's (dollars, tokens) spent on model calls, in order."""
    return rows(outdir, "SELECT spent_usd, spent_tokens FROM runs ORDER BY id")


@pytest.mark.docker
@pytest.mark.slow
def test_a_resume_with_a_larger_budget_reruns_the_cut_episodes(tmp_path, capsys):
    free = tmp_path / "free"
    assert sweep(sweep_file(tmp_path, free, None)) == 0
    expected = {key: row[2:] for key, row in stored(free).items()}  # (status, success, reward, turns)
    assert len(expected) == 10 and "budget_exhausted" not in {v[0] for v in expected.values()}

    out = tmp_path / "out"
    assert sweep(sweep_file(tmp_path, out, 1)) == 1, "the first answer spends the budget"
    first = stored(out)
    cut_keys = {k for k, v in first.items() if v[2] == "budget_exhausted"}
    assert cut_keys and len(first) < 10, "some episodes cut, some never started"
    assert any(first[k][5] >= 1 and 0 < first[k][4] < 1 for k in cut_keys), "cut mid-episode, partial reward"
    assert sum(s.cut for s in summarize_all(load_results(out).episodes)) == len(cut_keys)

    # The same budget again: the first run spent it (a budget holds across resumes), so nothing
    # starts and nothing is wiped.
    spent_first = run_spend(out)
    assert len(spent_first) == 1 and spent_first[0][1] >= 1
    assert sweep(sweep_file(tmp_path, out, 1)) == 1
    assert stored(out) == first
    assert run_spend(out) == spent_first + [(0.0, 0)]

    capsys.readouterr()
    assert sweep(sweep_file(tmp_path, out, 100_000)) == 0
    final = stored(out)
    assert {k: v[2:] for k, v in final.items()} == expected, "every episode once, as in an unbudgeted run"
    assert all(final[k][1] == 3 for k in cut_keys), "the cut ones were run again, by the last run"
    assert all(final[k][:2] == first[k][:2] for k in first.keys() - cut_keys), "the complete ones were kept"
    assert f"10/10 episodes stored ({10 - len(first) + len(cut_keys)} this run" in capsys.readouterr().err
    spends = run_spend(out)  # every run's own spend; the last one's within what the raised budget left
    assert [tokens > 0 for _, tokens in spends] == [True, False, True]
