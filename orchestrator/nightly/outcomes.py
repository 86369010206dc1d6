"""The facts a comparison needs about one episode, from a results.db or from the history store.

A nightly keeps only these in its history (not the whole results.db), so a baseline can be
compared with after its output directory is gone, e.g. when CI keeps only the history artifact.
An episode cut short by the budget has no outcome: it is incomplete, as if it had not run yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.store.records import EpisodeKey, Keyed
from orchestrator.store.results import StoredEpisode

Cell = tuple[str, str, str]  # (model, strategy, task_set)


@dataclass(frozen=True, slots=True)
class TaskOutcome(Keyed):
    """One episode's result; `infra` marks an infrastructure failure, which says nothing about the model."""

    key: EpisodeKey
    success: bool
    reward: float
    infra: bool = False

    @property
    def cell(self) -> Cell:
        return self.model, self.strategy, self.task_set


def from_episodes(episodes: Iterable[StoredEpisode]) -> list[TaskOutcome]:
    """The outcomes of the episodes, leaving out those cut short by the budget or unscored by their
    verifier: they measure neither model nor harness, so a comparison leaves their pair out (counted
    as unpaired), flaky tasks and the nightly's cell metrics skip them, and the history does not keep them."""
    return [TaskOutcome(e.key, e.success, e.reward, e.failure_class == "infra") for e in episodes if not e.unscored]


def by_cell(outcomes: Iterable[TaskOutcome]) -> dict[Cell, dict[tuple[str, int], TaskOutcome]]:
    """Outcomes per cell, keyed by (task_id, epoch): the pairing key of a comparison."""
    cells: dict[Cell, dict[tuple[str, int], TaskOutcome]] = {}
    for outcome in outcomes:
        cells.setdefault(outcome.cell, {})[outcome.task_id, outcome.epoch] = outcome
    return cells
