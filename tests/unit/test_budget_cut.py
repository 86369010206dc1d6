"""Episodes cut short by the budget: incomplete, not failures. Reports and comparisons leave them
out of every rate and mean and count them apart; a resume with a larger budget runs them again."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.nightly.compare import CompareSettings, compare
from orchestrator.nightly.nightly import cell_metrics
from orchestrator.nightly.outcomes import from_episodes
from orchestrator.report.content import build_content
from orchestrator.report.html import render_html
from orchestrator.report.markdown import render_markdown
from orchestrator.report.stats import wilson_interval
from orchestrator.report.summary import summarize_all
from orchestrator.store.records import EpisodeKey
from orchestrator.store.results import StoredEpisode, Results

CELL = ("openai/sim", "try_again", "starter-bash")


def episode(task: int, reward: float, *, status: str | None = None, turns: int = 1, tokens: int = 100,
            task_set: str = "starter-bash") -> StoredEpisode:
    """One episode of CELL's model and strategy; `status` defaults to solved (reward 1) or max_turns."""
    status = status or ("solved" if reward == 1.0 else "max_turns")
    cut = status == "budget_exhausted"
    return StoredEpisode(EpisodeKey(CELL[0], CELL[1], task_set, f"{task_set}/{task}", 0), "bash", status, "model" if cut else None,
                   reward, reward == 1.0 and not cut, turns, 3, tokens, 0, None, 1, turns if reward == 1.0 else None)


def cut(task: int, reward: float, *, turns: int = 1, tokens: int = 100, task_set: str = "starter-bash") -> StoredEpisode:
    return episode(task, reward, status="budget_exhausted", turns=turns, tokens=tokens, task_set=task_set)


def results(episodes: list[StoredEpisode]) -> Results:
    return Results(Path("/nowhere/results.db"), {"sweep": "cut"}, [], episodes, [], [])


# ------------------------------------------------------------------ reports, on hand-made episodes

def test_cut_episodes_are_in_no_rate_or_mean_and_are_counted_apart():
    episodes = [episode(0, 1.0), episode(1, 0.5, turns=3, tokens=300),
                cut(2, 0.67, tokens=50), cut(3, 0.0, turns=0, tokens=0)]
    (summary,) = summarize_all(episodes)
    assert (summary.episodes, summary.cut, summary.successes, summary.success_rate) == (2, 2, 1, 0.5)
    assert (summary.ci_low, summary.ci_high) == wilson_interval(1, 2)
    assert summary.mean_reward == pytest.approx(0.75), "the partial 0.67 of a cut episode is not averaged in"
    assert summary.mean_turns == 2.0
    assert summary.failures == {"model": 0, "task": 0, "infra": 0, "verifier": 0, "agent": 0,
                                "network": 0}, "cut is not a model failure"
    assert (summary.total_tokens, summary.mean_tokens) == (450, 200), "spent tokens count; the mean is per complete"
    view = build_content(results(episodes))
    assert view.overall_success == 0.5 and view.cut_by_budget == 2
    assert dict(view.curves["starter-bash"]) == {"openai/sim / try_again": [0.5, 0.5, 0.5]}


def test_the_report_shows_the_cut_per_cell_in_markdown_and_html():
    episodes = [episode(0, 1.0), episode(1, 0.5), cut(2, 0.67),
                cut(0, 0.67, task_set="starter-sql"), cut(1, 0.0, task_set="starter-sql")]
    view = build_content(results(episodes))
    md, html = render_markdown(view), render_html(view)
    assert "| openai/sim | try_again | 50.0% (0.75) | — (—) |" in md
    assert md.count("cut by budget |") == 1  # the header of the per-cell table
    assert "| openai/sim | try_again | starter-bash | 2 | 50.0% (1) |" in md
    bash_row = next(line for line in md.splitlines() if line.startswith("| openai/sim | try_again | starter-bash | 2"))
    sql_row = next(line for line in md.splitlines() if line.startswith("| openai/sim | try_again | starter-sql |"))
    assert bash_row.endswith("| 0 | 0 | 0 | 1 |") and sql_row.endswith("| 0 | 0 | 0 | 2 |")
    assert "| openai/sim | try_again | starter-sql | 0 | — (0) |" in sql_row
    assert "**3 episodes cut short by the budget**" in md and "Episodes: 5 (3 cut by budget)" in md
    assert 'id="budget-warning"' in html and "<th>cut by budget</th>" in html
    assert "<td>2</td><td>50.0% (1)</td>" in html
    assert html.count('class="bar"') == 1, "a cell whose every episode was cut has no bar (no rate is known)"
    assert "### starter-sql" not in md, "nor a curve"


def test_no_cut_episodes_no_note():
    view = build_content(results([episode(0, 1.0), episode(1, 0.0)]))
    md = render_markdown(view)
    assert "cut short" not in md and "cut by budget)" not in md
    assert "| openai/sim | try_again | starter-bash | 2 | 50.0% (1) |" in md and "| 0 | 0 | 0 | 0 |" in md


def test_a_comparison_leaves_a_cut_pair_out_rather_than_blaming_the_model():
    base = [episode(i, 1.0) for i in range(20)]
    cur = [episode(i, 1.0) for i in range(10)] + [cut(i, 0.67) for i in range(10, 20)]
    (cell,) = compare(from_episodes(base), from_episodes(cur), CompareSettings(resamples=200)).cells
    assert (cell.pairs, cell.unpaired, cell.pass_to_fail, cell.verdict) == (10, 10, (), "no change")
    assert cell.cur_success == 1.0 and cell.reward is not None and cell.reward.difference == 0.0
    (metrics,) = cell_metrics(from_episodes(cur), {})
    assert (metrics.n, metrics.success_rate, metrics.mean_reward) == (10, 1.0, 1.0)


def sweep(path: Path) -> int:
    return main(["sweep", str(path), "--quiet", "--no-report"])
