"""The SQL reward on hand-made results: the original's arithmetic and quirks, and strict mode."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from environments.rewards.sql import (
    is_ordered,
    original_reward,
    original_rows,
    strict_reward,
    strict_row,
)
from environments.sql import mysql_wording

A, B, C, D = "('a',)", "('b',)", "('c',)", "('d',)"


def test_both_empty_scores_one() -> None:
    assert original_reward([], []) == 1.0
    assert strict_reward([], [], ordered=True) == 1.0


def test_an_error_or_no_result_set_scores_zero() -> None:
    assert original_reward(None, [A]) == 0.0
    assert original_reward(None, []) == 0.0  # an error is not an empty result
    assert strict_reward(None, [], ordered=False) == 0.0


def test_identical_results_score_one() -> None:
    assert original_reward([A, B, C], [A, B, C]) == 1.0


def test_partial_overlap_is_iou_times_tau() -> None:
    # shared b, c (in the same order, tau 1); union a, b, c, d
    assert original_reward([A, B, C], [B, C, D]) == 0.5


def test_duplicates_count_as_a_multiset() -> None:
    # intersection {a:1, b:1} = 2, union {a:2, b:1} = 3, tau 1 -> round(2/3, 2)
    assert original_reward([A, A, B], [A, B]) == 0.67


def test_nan_tau_leaves_the_iou_unrounded() -> None:
    # one shared row: tau is NaN, so the original skipped the scaling and the rounding
    assert original_reward([A, B, C], [A]) == pytest.approx(1 / 3)
    assert original_reward([A, B, C], [A]) != 0.33
    assert original_reward([A, A], [A, A]) == 1.0  # constant input: NaN too, IoU 1


def test_order_matters_through_tau_and_can_go_negative() -> None:
    assert original_reward([C, B, A], [A, B, C]) == -1.0  # the original's quirk
    assert original_reward([A, C, B], [A, B, C]) == 0.33


def test_tau_compares_string_ranks_not_positions() -> None:
    # The original paired the i-th shared row of each side and ranked them as strings: rows
    # that share no order by value still get tau 1 when both sides list them alike.
    assert original_reward([B, A], [B, A]) == 1.0


def test_original_rows_are_str_of_the_driver_tuples() -> None:
    rows = original_rows([(1, Decimal("2.50"), None, date(2024, 3, 1), b"int")])
    assert rows == ["(1, Decimal('2.50'), None, datetime.date(2024, 3, 1), b'int')"]


def test_strict_is_never_negative_and_ignores_order_when_unordered() -> None:
    assert strict_reward([C, B, A], [A, B, C], ordered=True) == 0.0
    assert strict_reward([C, B, A], [A, B, C], ordered=False) == 1.0
    assert strict_reward([A, B, C], [A], ordered=True) == 0.33  # always rounded


def test_strict_compares_positions() -> None:
    # one swap out of three pairs: tau 1/3
    assert strict_reward([B, A, C], [A, B, C], ordered=True) == 0.33


def test_strict_rows_equal_values_of_equal_meaning() -> None:
    assert strict_row((1,)) == strict_row((Decimal("1.00"),)) == strict_row((1.0,))
    assert strict_row((0.1 + 0.2,)) == strict_row((0.3,))
    assert strict_row((b"x", date(2024, 3, 1))) == strict_row(("x", date(2024, 3, 1)))
    assert strict_row((1.5,)) != strict_row((1,))


@pytest.mark.parametrize(("query", "ordered"), [
    ("SELECT a FROM t ORDER BY a", True),
    ("select a from t order  by a desc limit 1", True),
    ("SELECT a FROM t WHERE b IN (SELECT b FROM u ORDER BY b LIMIT 3)", False),
    ("SELECT 'order by' FROM t", False),
    ("SELECT a FROM t GROUP BY a", False),
])
def test_is_ordered_looks_at_the_outermost_query(query: str, ordered: bool) -> None:
    assert is_ordered(query) is ordered


@pytest.mark.parametrize(("mariadb", "mysql"), [
    ("Unknown column 'x' in 'SELECT'", "Unknown column 'x' in 'field list'"),
    ("Unknown column 'T1.x' in 'WHERE'", "Unknown column 'T1.x' in 'where clause'"),
    ("Unknown column 'id' in 'IN/ALL/ANY'", "Unknown column 'id' in 'IN/ALL/ANY subquery'"),
    ("Column 'id' in SELECT is ambiguous", "Column 'id' in field list is ambiguous"),
    ("This version of MariaDB doesn't yet support 'LIMIT & IN/ALL/ANY/SOME subquery'",
     "This version of MySQL doesn't yet support 'LIMIT & IN/ALL/ANY/SOME subquery'"),
    ("Table 'world_1.cities' doesn't exist", "Table 'world_1.cities' doesn't exist"),
])
def test_error_messages_use_mysql_wording(mariadb: str, mysql: str) -> None:
    assert mysql_wording(mariadb) == mysql
