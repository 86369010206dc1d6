"""SQL rewards: how close an agent's result set is to the gold one. Pure functions, no database.

A result is a list of rows already turned into strings (one string per row), or None when the last
action gave no result set (an error, or a statement such as `USE`). Two modes:

- `original_reward` is InterCode's arithmetic, quirks included: the IoU of the two multisets of
  `str(row)`, scaled by scipy's Kendall tau over the rows both sides share, and rounded to two
  decimals only when that scaling applied (a NaN tau leaves the IoU unrounded; a reversed order can
  give a negative reward).
- `strict_reward` fixes the quirks: always rounded, never negative, the order only counts when the
  gold query orders its result, and the order is compared by position, not by string value.
  Rows are compared through `strict_row`, which makes values of equal meaning equal (1, 1.0 and
  Decimal('1.00'); floats to 10 significant digits, so MariaDB and MySQL formatting agree).
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

Rows = Sequence[str] | None


def original_rows(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """Rows as the original compared them: `str()` of each tuple the driver returned."""
    return [str(row) for row in rows]


@dataclass(frozen=True, slots=True)
class SqlScore:
    """A reward and its parts: the multiset IoU of the rows, and Kendall's tau of the shared rows'
    order where it scaled the IoU (None where it did not: no shared rows, an undefined tau, or in
    strict mode a gold without ORDER BY)."""

    reward: float
    iou: float | None  # None: one side gave no result set
    tau: float | None
    agent_rows: int
    gold_rows: int
    shared_rows: int

    def parts(self) -> dict[str, Any]:
        return {"iou": _rounded(self.iou), "kendall_tau": _rounded(self.tau), "agent_rows": self.agent_rows,
                "gold_rows": self.gold_rows, "shared_rows": self.shared_rows}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def original_reward(agent: Rows, gold: Rows) -> float:
    """InterCode's `SqlEnv.get_reward`, value for value."""
    return original_score(agent, gold).reward


def original_score(agent: Rows, gold: Rows) -> SqlScore:
    """`original_reward` with its parts."""
    if agent is None or gold is None:
        return SqlScore(0.0, None, None, len(agent or ()), len(gold or ()), 0)
    dist_agent, dist_gold = Counter(agent), Counter(gold)
    intersection = dist_agent & dist_gold
    union = dist_agent | dist_gold  # the original's merge keeps each row's larger count: the same
    sizes = (len(agent), len(gold), intersection.total())
    if not union:
        return SqlScore(1.0, 1.0, None, *sizes)  # both empty
    reward = iou = intersection.total() / union.total()
    tau = None
    if intersection:
        value = _kendalltau(_common(agent, intersection), _common(gold, intersection))
        if not math.isnan(value):
            # tau is a numpy float, so this is numpy's rounding (scale, round half even, unscale),
            # which differs from Python's on some halves: keep it, it is what the original did.
            reward, tau = float(round(value * reward, 2)), float(value)
    return SqlScore(reward, iou, tau, *sizes)


def strict_reward(agent: Rows, gold: Rows, *, ordered: bool) -> float:
    """Multiset IoU, times max(0, tau) of the common rows' positions when the gold is ordered."""
    return strict_score(agent, gold, ordered=ordered).reward


def strict_score(agent: Rows, gold: Rows, *, ordered: bool) -> SqlScore:
    """`strict_reward` with its parts."""
    if agent is None or gold is None:
        return SqlScore(0.0, None, None, len(agent or ()), len(gold or ()), 0)
    dist_agent, dist_gold = Counter(agent), Counter(gold)
    intersection = dist_agent & dist_gold
    union = dist_agent | dist_gold
    sizes = (len(agent), len(gold), intersection.total())
    if not union:
        return SqlScore(1.0, 1.0, None, *sizes)
    reward = iou = intersection.total() / union.total()
    tau = None
    if ordered and intersection:
        value = float(_kendalltau(list(range(intersection.total())), _gold_positions(agent, gold, intersection)))
        tau = None if math.isnan(value) else value  # NaN: fewer than two rows, nothing to order
        reward *= 1.0 if tau is None else max(tau, 0.0)
    return SqlScore(round(reward, 2), iou, tau, *sizes)


def _common(rows: Sequence[str], intersection: Counter[str]) -> list[str]:
    """The rows that are in the intersection, in this list's order, each as often as it's shared."""
    left = intersection.copy()
    kept = []
    for row in rows:
        if left[row] > 0:
            left[row] -= 1
            kept.append(row)
    return kept


def _gold_positions(agent: Sequence[str], gold: Sequence[str], intersection: Counter[str]) -> list[int]:
    """For each shared row in the agent's order, where the gold has it (duplicates matched in turn)."""
    where: dict[str, list[int]] = {}
    for position, row in enumerate(gold):
        where.setdefault(row, []).append(position)
    taken: Counter[str] = Counter()
    positions = []
    for row in _common(agent, intersection):
        positions.append(where[row][taken[row]])
        taken[row] += 1
    return positions


def _kendalltau(x: Sequence[Any], y: Sequence[Any]) -> np.float64:
    # scipy warns (and returns NaN) for fewer than two items or constant input: that NaN is the
    # original's "leave the IoU unrounded" path, not a problem worth a warning.
    from scipy.stats import kendalltau  # here: scipy.stats takes about a second to import, and only SQL needs it

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.float64(kendalltau(x, y, nan_policy="omit").statistic)


# ------------------------------------------------------------------ strict mode's row comparison

def strict_rows(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    return [strict_row(row) for row in rows]


def strict_row(row: tuple[Any, ...]) -> str:
    return repr(tuple(_strict_value(value) for value in row))


def _strict_value(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | Decimal):
        return _number(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return str(value)


def _number(value: int | float | Decimal) -> str:
    """One spelling per number: integers exactly, the rest to 10 significant digits."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value == int(value) and -(2**63) < value < 2**63:
        return str(int(value))
    return format(float(value), ".10g")


_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`[^`]*`", re.S)
_PARENS = re.compile(r"\([^()]*\)")
_ORDER_BY = re.compile(r"\border\s+by\b", re.I)


def is_ordered(query: str) -> bool:
    """Whether the query's outermost SELECT has an ORDER BY (a subquery's ORDER BY doesn't count)."""
    text = _STRING.sub("''", query)
    while True:
        stripped = _PARENS.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    return bool(_ORDER_BY.search(text))
