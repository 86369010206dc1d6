"""From episodes to the numbers a report shows: one summary per model × strategy × task set.

Pure functions over `StoredEpisode` records (orchestrator/store/results.py), so compare and tests can use them without a database.
Infra failures count as episodes (they are in the denominator) and are counted separately so a
reader sees how much of a rate is the harness's fault rather than the model's. Episodes cut short
by the budget are incomplete, not failures: they are in no rate, mean, failure count or curve, only
counted apart (`cut`) and in the totals of tokens and cost (their calls were made and paid for);
a resume with a larger budget runs them again. Episodes whose task's verifier gave no reward are
left out of rates and means the same way, and counted as the `verifier` failures, or `network` ones
when the verifier needed the internet the container did not have.

A Harbor task's verifier may give several reward keys (reward.json); each cell that has a key but
`reward` gets the mean of each, as Harbor's default metric gives it (harbor/metrics/base.py Mean,
0.26): over the trials with a valid reward, a key a trial lacks counted 0, the failed ones left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from foundation.outcome import NOT_THE_MODELS, UNSCORED, FailureClass
from orchestrator.report.stats import mean, wilson_interval
from orchestrator.store.results import StoredEpisode

FAILURE_CLASSES: tuple[str, ...] = tuple(FailureClass)
Cell = tuple[str, str, str]  # (model, strategy, task_set)


@dataclass(frozen=True)
class KeyMeans:
    """The mean of each reward key over a cell's scored episodes: those neither failed but by the
    model's fault (NOT_THE_MODELS: Harbor leaves such trials out) nor cut by the budget."""

    episodes: int  # the scored episodes
    means: dict[str, float | None]  # key -> its mean, `reward` first; None when no episode is scored


@dataclass(frozen=True)
class CellSummary:
    """What the report says about one model × strategy × task set."""

    model: str
    strategy: str
    task_set: str
    episodes: int  # complete episodes: the denominator of every rate and mean
    cut: int  # cut short by the budget: in no rate or mean
    successes: int
    ci_low: float
    ci_high: float
    mean_reward: float | None
    mean_turns: float | None
    total_tokens: int  # every stored episode's, cut ones included
    mean_tokens: float | None  # per complete episode
    cost_usd: float | None  # sum over priced episodes; None when no episode could be priced
    unpriced_episodes: int  # cost unknown, or some of its calls could not be priced
    failures: dict[str, int]  # failure class -> episodes
    key_means: KeyMeans | None  # None: no episode's verifier gave a reward key but `reward`

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None


def group_by_cell(episodes: Iterable[StoredEpisode]) -> dict[Cell, list[StoredEpisode]]:
    """Episodes per (model, strategy, task_set), cells in sorted order."""
    groups: dict[Cell, list[StoredEpisode]] = defaultdict(list)
    for episode in episodes:
        groups[episode.cell].append(episode)
    return dict(sorted(groups.items()))


def complete(episodes: Iterable[StoredEpisode]) -> list[StoredEpisode]:
    """The episodes that ran to their end and were scored: those cut short by the budget, and
    those whose verifier gave no reward, left out."""
    return [e for e in episodes if not e.unscored]


def summarize(cell: Cell, episodes: list[StoredEpisode]) -> CellSummary:
    """The summary of one cell's episodes (see the module's docstring for cut ones)."""
    done = complete(episodes)
    successes = sum(e.success for e in done)
    low, high = wilson_interval(successes, len(done))
    priced = [e.cost_usd for e in episodes if e.cost_usd is not None]
    failures = {name: sum(e.failure_class == name for e in (episodes if name in UNSCORED else done))
                for name in FAILURE_CLASSES}
    return CellSummary(
        *cell, episodes=len(done), cut=sum(e.cut_by_budget for e in episodes), successes=successes, ci_low=low, ci_high=high,
        mean_reward=mean([e.reward for e in done]), mean_turns=mean([e.n_turns for e in done]),
        total_tokens=sum(e.prompt_tokens + e.completion_tokens for e in episodes),
        mean_tokens=mean([e.prompt_tokens + e.completion_tokens for e in done]),
        cost_usd=sum(priced) if priced else None,
        unpriced_episodes=sum(e.cost_usd is None or e.unpriced_calls > 0 for e in episodes),
        failures=failures, key_means=key_means(episodes))


def key_means(episodes: list[StoredEpisode]) -> KeyMeans | None:
    """The mean of each reward key any of the episodes has, over the scored ones (a key an episode
    lacks counted 0); None when no episode has a key but `reward` (the cell's mean reward says it)."""
    keys = key_order({key for e in episodes for key in e.reward_keys})
    if keys in ([], ["reward"]):
        return None
    scored = [e for e in episodes if not e.cut_by_budget and e.failure_class not in NOT_THE_MODELS]
    return KeyMeans(len(scored), {key: mean([e.reward_keys.get(key, 0.0) for e in scored]) for key in keys})


def key_order(keys: Iterable[str]) -> list[str]:
    """Reward keys as the tables show them: the headline `reward` first, then by name."""
    return sorted(keys, key=lambda key: (key != "reward", key))


def summarize_all(episodes: Iterable[StoredEpisode]) -> list[CellSummary]:
    """One summary per cell, sorted by model, strategy, task set."""
    return [summarize(cell, group) for cell, group in group_by_cell(episodes).items()]


def turn_budget_curve(episodes: list[StoredEpisode], max_turns: int | None = None) -> list[float]:
    """Share of episodes that reached reward 1.0 within their first t turns, for t = 1..max_turns.

    The denominator is every complete episode of the cell (failed ones included, cut ones not), so
    the last point is the share that ever reached 1.0. `max_turns` defaults to the largest turn
    budget of the episodes.
    """
    episodes = complete(episodes)
    if not episodes:
        return []
    horizon = max_turns if max_turns is not None else max(e.max_turns for e in episodes)
    firsts = [e.first_full_turn for e in episodes if e.first_full_turn is not None]
    return [sum(first <= t for first in firsts) / len(episodes) for t in range(1, horizon + 1)]


@dataclass(frozen=True)
class PaperTable:
    """The InterCode paper's table 3 shape: rows model × strategy, columns task sets."""

    task_sets: list[str]
    rows: list[tuple[str, str]]
    cells: dict[Cell, CellSummary]

    def get(self, row: tuple[str, str], task_set: str) -> CellSummary | None:
        return self.cells.get((row[0], row[1], task_set))


def paper_table(summaries: list[CellSummary]) -> PaperTable:
    """Arrange the summaries as rows = model × strategy, columns = task sets (sorted)."""
    task_sets = sorted({s.task_set for s in summaries})
    rows = sorted({(s.model, s.strategy) for s in summaries})
    return PaperTable(task_sets, rows, {(s.model, s.strategy, s.task_set): s for s in summaries})
