"""Two runs side by side: the pairs of two stores (orchestrator/store/episode_pairs.py), paged and
looked up by cell.

Every pair of the two stores is read with one join and kept while neither store changes (the app
caches it under both change tokens), so a page of pairs, a cell's pairs and the next flipped task
from a pair's page are lookups in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.store.episode_pairs import Pair
from orchestrator.store.episode_query import PAGE_SIZE


@dataclass(frozen=True)
class PairPage:
    pairs: list[Pair]
    total: int
    flipped: int  # pairs (in the filter) whose success differs

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


class Pairs:
    """Every pair of two stores in the list's order, with each cell's pairs apart (a page of one
    cell, or a pair's neighbours in it, is then no pass over every pair)."""

    def __init__(self, pairs: list[Pair]) -> None:
        self.all = pairs
        self.by_cell: dict[tuple[str, str, str], list[Pair]] = {("", "", ""): pairs}
        for pair in pairs:
            self.by_cell.setdefault((pair.model, pair.strategy, pair.task_set), []).append(pair)

    def of(self, cell: tuple[str, str, str]) -> list[Pair]:
        """The pairs of `cell` (an empty part: any), in the list's order; a filter of part of a
        cell (a model's) is kept once made."""
        if cell not in self.by_cell:
            self.by_cell[cell] = [p for p in self.all if p.in_cell(cell)] if not all(cell) else []
        return self.by_cell[cell]


def pair_page(pairs: Pairs, cell: tuple[str, str, str], page: int, flipped_only: bool) -> PairPage:
    """Page `page` (from 1) of the pairs of `cell` (empty parts: any), flipped first."""
    mine = pairs.of(cell)
    flipped = sum(p.flipped for p in mine)
    shown = [p for p in mine if p.flipped] if flipped_only else mine
    start = (page - 1) * PAGE_SIZE
    return PairPage(shown[start:start + PAGE_SIZE], len(shown), flipped)


def flipped_around(pairs: Pairs, cell: tuple[str, str, str], a_id: int, b_id: int) -> tuple[Pair | None, Pair | None]:
    """The flipped pairs of `cell` before and after the pair (a_id, b_id) in the list's order (the
    first flipped one after nothing, when the pair is not in the list)."""
    order = pairs.of(cell)
    here = next((i for i, p in enumerate(order) if p.a_id == a_id and p.b_id == b_id), -1)
    before = next((p for p in reversed(order[:here]) if p.flipped), None) if here > 0 else None
    after = next((p for p in order[here + 1:] if p.flipped), None)
    return before, after
