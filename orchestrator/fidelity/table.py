"""`replay --table DIR`: the paper's success table, as recorded and as our replay recomputes it.

Cells are model × environment × strategy, as the paper's tables are. The strategy follows from
the file's format (see `formats.py`); the model from the file's path (`model_of`: eval_n_turn.py
put `--model` in the name it wrote; ReAct's and Plan & Solve's scripts did not, their folder names
it, or their files go under the model ""). Single is the paper's single-turn run; where a model and
environment have no single-turn file, it is taken from the first turn of their Try Again runs,
as the paper did. Each cell has one row per file and, with several files, one for the cell.

Success is the paper's: the best reward of the episode is exactly 1; for Single, the first turn's.
Both rates are over the episodes replayed in full; an episode left out (bad, its task unavailable
here, its container broken under it) is counted apart, and `recorded_all` is the recorded rate
over every episode, the paper's own figure. `agreement` is the per-turn agreement share of the
compared turns. A cell whose recomputed rate is more than a point off the recorded one is flagged.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from environments.kind import kind_names
from orchestrator.fidelity.formats import (
    PLAN_AND_SOLVE,
    REFINE,
    SINGLE,
    STRATEGY,
    TRY_AGAIN,
)
from orchestrator.fidelity.replayed_turn import TurnResult
from orchestrator.fidelity.trajectories import CTF, HUMAN, REACT, RecordedEpisode, key_in_file

STRATEGIES = (SINGLE, TRY_AGAIN, STRATEGY[REACT], PLAN_AND_SOLVE, REFINE, STRATEGY[CTF], STRATEGY[HUMAN])
ONE = 1 - 1e-9  # "exactly 1", for rewards that went through float arithmetic
POINT = 0.01 + 1e-9  # a cell off by more than this is flagged
# The model in a file's name as the original's scripts wrote it: eval_n_turn.py's
# `{env}_multiturn_{model}_{turns}_turns.json` (eval_n_turn_others.py's with `starchat`), anything
# between; ours (`export`) begin `{model}__`.
NAMED = (re.compile(r"(?:^|_)multiturn_(.+?)_\d+_turns(?:_|\.json$|$)", re.IGNORECASE),
         re.compile(r"^([^_].*?)__.+__.+\.json$"))
# Otherwise a model family anywhere in the path (Plan & Solve, ReAct and CTF files are named without
# a model: the folder they were written to names it); `_` separates the name's parts.
MODEL = re.compile(r"(?:^|[_/-])((?:gpt-?[34]|text-davinci|code-davinci|[a-z]+-bison|palm|gemini|starchat|vicuna|"
                   r"llama|codellama|claude|falcon|starcoder|mistral|mixtral|deepseek|qwen|wizardcoder)[\w.-]*?)"
                   r"(?=_|/|\.json$|$)", re.IGNORECASE)
FIRST_TURNS = "first turns of {} Try Again file{}"
# The kinds of the paper's Single and Try Again tables: their harness scored every turn, so a first
# turn is a single-turn answer (CTF's scored only a submitted flag).
FIRST_TURN_KINDS = ("bash", "sql", "python")


@dataclass
class Row:
    """One file of a cell, or the whole cell (`file` then says how many files)."""

    environment: str
    strategy: str
    file: str
    model: str = ""
    episodes: int = 0
    left_out: int = 0
    recorded_solved: int = 0  # of the episodes replayed in full
    recomputed_solved: int = 0
    recorded_solved_all: int = 0  # of every episode
    turns: int = 0  # compared turns
    agreed: int = 0
    # Episodes replayed in full whose success differs from the recording's: (file, key in it,
    # recorded solved), for `replay --explain`
    differ: list[tuple[str, str, bool]] = field(default_factory=list)

    @property
    def replayed(self) -> int:
        return self.episodes - self.left_out

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.model, self.environment, self.strategy)

    def add(self, other: Row) -> None:
        for name in ("episodes", "left_out", "recorded_solved", "recomputed_solved", "recorded_solved_all",
                     "turns", "agreed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.differ += other.differ

    def rates(self) -> dict[str, float | None]:
        def share(n: int, of: int) -> float | None:
            return round(n / of, 4) if of else None

        return {"recorded": share(self.recorded_solved, self.replayed),
                "recomputed": share(self.recomputed_solved, self.replayed),
                "recorded_all": share(self.recorded_solved_all, self.episodes),
                "agreement": share(self.agreed, self.turns)}

    def off(self) -> bool:
        """Whether the recomputed rate is more than a point off the recorded one."""
        rates = self.rates()
        recorded, recomputed = rates["recorded"], rates["recomputed"]
        return recorded is not None and recomputed is not None and abs(recomputed - recorded) > POINT


Table = list[tuple[Row, list[Row]]]  # each cell's total, and its files' rows


def model_of(source: str, root: Path | None = None) -> str:
    """The model a file's name names, or else the folders from `root` (the folder replayed, itself
    included) down to it, lower-cased; "" when none does."""
    path = Path(source)
    for pattern in NAMED:
        named = pattern.search(path.name)
        if named:
            return named[1].lower()
    below = root is not None and path.is_relative_to(root)
    text = f"{root.name}/{path.relative_to(root)}" if root is not None and below else path.name
    found = MODEL.findall(text)  # the last: the folder nearest the file
    return found[-1].lower() if found else ""


def success_table(episodes: list[RecordedEpisode], results: list[TurnResult], bad: Iterable[str],
                  root: Path | None = None) -> Table:
    """The cells in the paper's order. `bad`: the keys of the bad episodes; `root`: the directory
    replayed (the models are read from the paths below it)."""
    by_episode: dict[str, list[TurnResult]] = defaultdict(list)
    for result in results:
        by_episode[result.episode].append(result)
    bad_keys = set(bad)
    files: dict[tuple[str, str, str, str], Row] = {}
    for episode in episodes:
        model = model_of(episode.source, root)
        key = (model, episode.kind, episode.strategy, episode.source)
        row = files.setdefault(key, Row(episode.kind, episode.strategy, episode.source, model))
        row.add(_episode_row(episode, by_episode[episode.key], episode.key in bad_keys, episode.strategy == SINGLE))
    cells: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for row in files.values():
        cells[row.cell].append(row)
    for cell, rows in _first_turn_cells(episodes, by_episode, bad_keys, cells, root).items():
        cells[cell] = rows
    return [(_total(cell, cells[cell]), cells[cell]) for cell in sorted(cells, key=_order)]


def _first_turn_cells(episodes: list[RecordedEpisode], by_episode: dict[str, list[TurnResult]], bad: set[str],
                      cells: dict[tuple[str, str, str], list[Row]], root: Path | None
                      ) -> dict[tuple[str, str, str], list[Row]]:
    """Single cells from the first turns of Try Again runs, where a model and environment have no
    single-turn file."""
    derived: dict[tuple[str, str, str], Row] = {}
    sources: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for episode in episodes:
        if episode.strategy != TRY_AGAIN or episode.kind not in FIRST_TURN_KINDS:
            continue
        cell = (model_of(episode.source, root), episode.kind, SINGLE)
        if cell in cells:
            continue
        row = derived.setdefault(cell, Row(episode.kind, SINGLE, "", cell[0]))
        row.add(_episode_row(episode, by_episode[episode.key][:1], episode.key in bad, True))
        sources[cell].add(episode.source)
    for cell, row in derived.items():
        n = len(sources[cell])
        row.file = FIRST_TURNS.format(n, "" if n == 1 else "s")
    return {cell: [row] for cell, row in derived.items()}


def _total(cell: tuple[str, str, str], rows: list[Row]) -> Row:
    if len(rows) == 1:
        return rows[0]
    total = Row(cell[1], cell[2], f"({len(rows)} files)", cell[0])
    for row in rows:
        total.add(row)
    return total


def _order(cell: tuple[str, str, str]) -> tuple[bool, str, int, int, str, str]:
    model, env, strategy = cell
    order = kind_names()
    return (model == "", model, order.index(env) if env in order else len(order),
            STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES), env, strategy)


def _episode_row(episode: RecordedEpisode, results: list[TurnResult], bad: bool, single: bool) -> Row:
    recorded = _solved([t.reward for t in episode.turns], single)
    left_out = bad or any(r.ours is None for r in results)
    counted = [r for r in results if r.counted]
    ours = _solved([r.ours for r in results], single)
    differ = [(episode.source, key_in_file(episode), recorded)] if recorded != ours and not left_out else []
    return Row(episode.kind, episode.strategy, episode.source, "", 1, int(left_out),
               int(recorded and not left_out), int(ours and not left_out), int(recorded), len(counted),
               sum(r.agree for r in counted), differ)


def _solved(rewards: list[float | None], single: bool) -> bool:
    """The paper's success: the best reward is exactly 1 (Single: the first turn's)."""
    return any(r is not None and r >= ONE for r in (rewards[:1] if single else rewards))


def print_table(table: Table, root: Path | None = None) -> None:
    """The table as text; files are named relative to `root` (the directory replayed). Under it,
    for each cell off by more than a point, its episodes whose success differs, worst way first,
    each as the `replay --explain` that shows it."""
    width = _model_width(total.model for total, _ in table)
    print(f"{'model':<{width + 1}}{'env':<6} {'strategy':<21} {'episodes':>8} {'left out':>8} {'recorded':>9} "
          f"{'recomputed':>10} {'off':>5} {'turns':>6} {'agreement':>9}  file")
    for total, rows in table:
        for row in rows + ([total] if len(rows) > 1 else []):
            rates = row.rates()
            name = _name(row.file, root) if row.file.endswith(".json") else row.file
            model = f"{row.model or '-':<{width}} " if width else ""
            print(f"{model}{row.environment:<6} {row.strategy:<21} "
                  f"{row.episodes:>8} {row.left_out:>8} {_percent(rates['recorded']):>9} "
                  f"{_percent(rates['recomputed']):>10} {_off(row, row is total):>5} {row.turns:>6} "
                  f"{_fraction(rates['agreement']):>9}  {name}")
    flagged = [total for total, _ in table if total.off()]
    print("success: best reward exactly 1 (Single: the first turn's), over the episodes replayed in full; "
          "agreement: per-turn, of the turns compared; off: recomputed less recorded, in points, ! beyond one")
    if flagged:
        print(f"{len(flagged)} of {len(table)} cells off by more than a point: "
              + ", ".join(_cell_name(total) for total in flagged))
    for total in flagged:
        print(f"{_cell_name(total)}: {_differ_line(total)}")
        for source, key, recorded in _worst(total)[:WORST]:
            solved = "recorded solved, ours not" if recorded else "ours solved, the recording not"
            print(f"  python -m orchestrator replay --explain {shlex.quote(source)} {shlex.quote(key)}   # {solved}")


WORST = 5  # episodes listed under a flagged cell


def _worst(total: Row) -> list[tuple[str, str, bool]]:
    """The cell's episodes whose success differs, those that pull it the way it is off first."""
    rates = total.rates()
    higher = (rates["recomputed"] or 0) > (rates["recorded"] or 0)  # ours finds more successes
    return sorted(total.differ, key=lambda d: d[2] == higher)


def _differ_line(total: Row) -> str:
    ours = sum(not recorded for *_, recorded in total.differ)
    theirs = len(total.differ) - ours
    return (f"{len(total.differ)} episodes differ in success ({ours} solved only by ours, {theirs} only in the "
            "recording); the worst, each side by side with its replay:")


def _model_width(models: Iterable[str]) -> int:
    """The model column's width; 0 when no row names a model."""
    named = [model for model in models if model]
    return max(7, *map(len, named)) if named else 0


def _cell_name(row: Row) -> str:
    return " ".join(part for part in (row.model, row.environment, row.strategy) if part)


def _off(row: Row, cell: bool) -> str:
    rates = row.rates()
    recorded, recomputed = rates["recorded"], rates["recomputed"]
    if recorded is None or recomputed is None:
        return "-"
    points = 100 * (recomputed - recorded)
    return f"{points:+.1f}{'!' if cell and row.off() else ''}"


def _name(file: str, root: Path | None) -> str:
    path = Path(file)
    return str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else path.name


def table_json(table: Table) -> dict[str, Any]:
    def as_dict(row: Row) -> dict[str, Any]:
        return {**{f.name: getattr(row, f.name) for f in fields(row)}, "replayed": row.replayed, **row.rates()}

    return {"cells": [{**as_dict(total), "off": total.off(), "files": [as_dict(r) for r in rows]}
                      for total, rows in table]}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


HALF_POINT = 0.005 + 1e-9  # runs of a steady replay agree within this, cell by cell


@dataclass
class Spread:
    """A cell's recomputed rate in each run, and the spread between them."""

    cell: tuple[str, str, str]
    recomputed: list[float | None]

    @property
    def spread(self) -> float:
        known = [r for r in self.recomputed if r is not None]
        return max(known) - min(known) if known else 0.0

    @property
    def steady(self) -> bool:
        return self.spread <= HALF_POINT


def spreads(tables: list[Table]) -> list[Spread]:
    """Per cell of the first run's table, its recomputed rate in every run."""
    runs = [{total.cell: total.rates()["recomputed"] for total, _ in table} for table in tables]
    return [Spread(total.cell, [run.get(total.cell) for run in runs]) for total, _ in tables[0]]


def print_spread(rows: list[Spread]) -> None:
    width = _model_width(row.cell[0] for row in rows)
    runs = len(rows[0].recomputed) if rows else 0
    print(f"\n{runs} runs: the recomputed success of each cell in each run, and the spread between them")
    heads = "".join(f"{f'run {i + 1}':>8}" for i in range(runs))
    print(f"{'model':<{width + 1}}{'env':<6} {'strategy':<21}{heads} {'spread':>7}")
    for row in rows:
        model, env, strategy = row.cell
        rates = "".join(f"{_percent(r):>8}" for r in row.recomputed)
        flag = "" if row.steady else "!"
        named = f"{model or '-':<{width}} " if width else ""
        print(f"{named}{env:<6} {strategy:<21}{rates} {100 * row.spread:>6.1f}{flag}")
    unsteady = [row for row in rows if not row.steady]
    if unsteady:
        print(f"{len(unsteady)} of {len(rows)} cells spread by more than half a point: "
              + ", ".join(" ".join(p for p in row.cell if p) for row in unsteady))
    else:
        print(f"steady: every cell within half a point across the {runs} runs")


def spread_json(rows: list[Spread]) -> list[dict[str, Any]]:
    return [{"model": r.cell[0], "environment": r.cell[1], "strategy": r.cell[2], "recomputed": r.recomputed,
             "spread": round(r.spread, 4), "steady": r.steady} for r in rows]
