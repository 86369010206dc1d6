"""The Python environment's pure parts: the print rule and the MBPP reward arithmetic (no Docker)."""

from __future__ import annotations

import json

import pytest

from environments.python import defined_functions, wrap_strict, wrap_with_print
from environments.rewards.python import (
    MbppCheck,
    PythonGold,
    by_test,
    failed_test,
    original_gold_name,
    original_result,
    original_reward,
    strict_gold_name,
    strict_reward,
)
from foundation.sandbox import PythonResult

PASS = {"output": "", "error": ""}
ASSERT_FAILED = {"error": "Error: "}  # what a failing `assert` gives: AssertionError() prints as ""


@pytest.mark.parametrize(("action", "wrapped"), [
    ("x", "print(x)"),
    ("f(1) + 2", "print(f(1) + 2)"),
    ("x = 1", "x = 1"),
    ("print(x)", "print(x)"),
    ("import math", "import math"),
    ("assert f(1) == 2", "assert f(1) == 2"),
    ("x += 1", "print(x += 1)"),  # the original's quirks: only `=` and `import` count
    ("from math import sqrt", "print(from math import sqrt)"),
    ("for i in range(3): i", "print(for i in range(3): i)"),
    ("y = [print(i) for i in range(2)]", "y = [print(i) for i in range(2)]"),
])
def test_wrap_with_print_follows_the_original(action: str, wrapped: str) -> None:
    assert wrap_with_print(action) == wrapped


def test_wrap_with_print_raises_on_what_does_not_parse() -> None:
    with pytest.raises(SyntaxError):
        wrap_with_print("import re  def f(x):     return x")


@pytest.mark.parametrize(("action", "wrapped"), [
    ("x", "print(\nx\n)"),
    ("x  # a comment", "print(\nx  # a comment\n)"),
    ("x += 1", "x += 1"),
    ("from math import sqrt", "from math import sqrt"),
    ("print(1)", "print(1)"),
    ("f(1); g(2)", "f(1); g(2)"),
])
def test_wrap_strict_prints_a_single_expression_only(action: str, wrapped: str) -> None:
    assert wrap_strict(action) == wrapped


def test_defined_functions() -> None:
    code = "import re\ndef a(x):\n    def inner(): pass\n    return x\nasync def b(): pass"
    assert defined_functions(code) == ["a", "b"]
    assert defined_functions("def broken(:") == []


def test_original_result_drops_output_when_raised() -> None:
    assert original_result(PythonResult(output="1", error="", raised=False)) == {"output": "1", "error": ""}
    assert original_result(PythonResult(output="printed", error="Error: boom", raised=True)) == {"error": "Error: boom"}


def test_gold_names() -> None:
    gold = ("def is_Power_Of_Two (x):\n    return x\ndef helper(a):\n    return a\n"
            "def differ(a, b):\n    return helper(a ^ b)")
    tests = ["assert differ(13, 9) == True"]
    assert original_gold_name(gold) == "helper"  # the first `def name(`: a helper, and `def f (` is skipped
    assert strict_gold_name(gold, tests) == "differ"  # the function the tests call
    assert original_gold_name("def f (x):\n    return x") is None
    assert strict_gold_name("def f (x):\n    return x", []) == "f"


def test_codes_in_the_original_order_and_the_strict_one() -> None:
    meta = {"tests": ["assert f(1) == 2"], "test_setup_code": "k = 1"}
    original = MbppCheck.of("def f(x):\n    return x + k", meta, strict=False)
    assert original.pred_codes("mine") == ["f = mine", "k = 1", "assert f(1) == 2"]
    assert original.gold_codes() == ["k = 1", "def f(x):\n    return x + k", "assert f(1) == 2"]
    strict = MbppCheck.of("def f(x):\n    return x + k", meta, strict=True)
    assert strict.gold_codes() == ["def f(x):\n    return x + k", "k = 1", "assert f(1) == 2"]


def test_all_pass_and_partial() -> None:
    tests = ["t1", "t2", "t3"]
    gold = by_test(tests, [PASS, PASS, PASS])
    assert original_reward(by_test(tests, [PASS, PASS, PASS]), gold) == 1.0
    pred = by_test(tests, [PASS, ASSERT_FAILED, PASS])
    assert original_reward(pred, gold) == strict_reward(pred, gold) == pytest.approx(2 / 3)


def test_a_shared_failure_passes_in_original_mode_only() -> None:
    tests = ["t1", "t2"]
    gold = by_test(tests, [PASS, ASSERT_FAILED])
    pred = by_test(tests, [PASS, ASSERT_FAILED])
    assert original_reward(pred, gold) == 1.0
    assert strict_reward(pred, gold) == 0.5


def test_a_gold_only_error_fails_in_both_modes() -> None:
    tests = ["t1", "t2"]
    gold = by_test(tests, [PASS, {"error": "Error: name 'root' is not defined"}])
    pred = by_test(tests, [PASS, PASS])
    assert original_reward(pred, gold) == strict_reward(pred, gold) == 0.5


def test_printed_output_counts_in_original_mode_only() -> None:
    tests = ["t1"]
    gold = by_test(tests, [PASS])
    pred = by_test(tests, [{"output": "debug", "error": ""}])
    assert original_reward(pred, gold) == 0.0
    assert strict_reward(pred, gold) == 1.0


def test_repeated_tests_count_once_with_the_last_result() -> None:
    tests = ["t1", "t1", "t2"]
    pred = by_test(tests, [ASSERT_FAILED, PASS, PASS])
    assert list(pred) == ["t1", "t2"] and pred["t1"] == PASS
    assert original_reward(pred, by_test(tests, [PASS, PASS, PASS])) == 1.0


def test_no_tests_scores_zero() -> None:
    assert original_reward({}, {}) == strict_reward({}, {}) == 0.0


def test_failed_test_is_any_error_text() -> None:
    assert failed_test(ASSERT_FAILED) and failed_test({"output": "", "error": "a warning on stderr"})
    assert not failed_test(PASS)


def test_the_gold_reads_back_from_the_caches_json_form() -> None:
    results = [{"output": "1", "error": ""}, {"error": "Error: boom"}]
    gold = PythonGold.of(json.loads(json.dumps(results)))
    assert gold.results == tuple(results) and gold.by_test(["t1", "t2"]) == {"t1": results[0], "t2": results[1]}
    assert gold.by_test(["t", "t"]) == {"t": results[1]}  # a repeated test keeps its last result, as the original
