"""The Bash reward on hand-made cases: the original's arithmetic and quirks, and the strict fixes."""

from __future__ import annotations

import math

import pytest

from environments.ctf import flag_reward
from environments.rewards.bash import (
    bash_reward,
    content_paths,
    hash_command,
    parse_porcelain,
    parse_status,
    tfidf_similarity,
)


def test_status_is_split_on_whitespace_like_the_original():
    status = " M testbed/a.txt\n?? testbed/new dir/\nD  testbed/gone\n"
    assert parse_status(status) == [("testbed/a.txt", "M"), ("testbed/new", "??"), ("D", "dir/")]  # odd token dropped
    assert parse_porcelain(" M testbed/a.txt\0?? testbed/new dir/\0R  b\0a\0") == [
        ("testbed/a.txt", "M"), ("testbed/new dir/", "??"), ("b", "R")]


def test_identical_states_and_outputs_score_one():
    changes = [("testbed/x.txt", "??")]
    score = bash_reward(changes, changes, {"testbed/x.txt": ("h", "h")}, "some output here", "some output here")
    assert score.reward == 1.0 and (score.file_diff, score.file_changes, score.answer_similarity) == (0.33, 0.33, 0.33)


def test_missing_and_extra_files_lower_the_file_term():
    gold = [("testbed/a.txt", "??"), ("testbed/b.txt", "??")]
    agent = [("testbed/a.txt", "??"), ("testbed/c.txt", "??")]
    score = bash_reward(agent, gold, {"testbed/a.txt": ("1", "1")}, "", "")
    assert score.missing == [("testbed/b.txt", "??")] and score.extra == [("testbed/c.txt", "??")]
    assert score.file_diff == round(0.33 * (1 - math.erf(2)), 2) == 0.0
    assert score.file_changes == 0.33  # the one common change matched


def test_wrong_content_of_a_common_file():
    changes = [("testbed/a.txt", "??")]
    score = bash_reward(changes, changes, {"testbed/a.txt": ("agent-hash", "gold-hash")}, "x", "x")
    assert score.file_changes == 0.0 and score.reward == 0.01 + 0.33 + 0.0 + 0.33


def test_original_never_compares_modified_files_or_paths_without_a_dot():
    common = [("testbed/a.txt", "M"), ("testbed/Makefile", "??"), ("testbed/dir/", "??")]
    assert content_paths(common, common, strict=False) == [("testbed/Makefile", "??"), ("testbed/dir/", "??")]
    assert content_paths(common, common, strict=True) == sorted(common)
    assert hash_command("testbed/Makefile", strict=False) == ["md5deep", "-r", "testbed/Makefile"]
    hashes = {"testbed/Makefile": ("a", "b"), "testbed/dir/": ("c", "d")}
    assert bash_reward(common, common, hashes, "", "").file_changes == 0.33, "md5deep was missing: always equal"
    strict_hashes = {**hashes, "testbed/a.txt": ("e", "e")}
    assert bash_reward(common, common, strict_hashes, "", "", strict=True).file_changes == round(0.33 / 3, 2)


def test_no_common_changes_gives_the_full_content_term():
    assert bash_reward([], [], {}, "", "").file_changes == 0.33


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("hello world", "hello world", 1.0),
    ("", "", 1.0),          # no tokens: the original's fallback compares the texts
    ("2\n", "2\n", 1.0),    # single characters are not tokens either
    ("2\n", "3\n", 0.0),
    ("alpha beta", "gamma delta", 0.0),
    ("", "some words", 0.0),
])
def test_tfidf_similarity_edges(a, b, expected):
    assert tfidf_similarity(a, b) == pytest.approx(expected)


def test_tfidf_matches_scikit_learn_arithmetic():
    # Fitted on two documents: shared terms get idf 1, the others ln(3/2)+1; then l2 and a dot product.
    a, b = "apple apple banana", "apple cherry"
    rare = math.log(1.5) + 1
    u = {"apple": 2.0, "banana": rare}
    v = {"apple": 1.0, "cherry": rare}
    norm_u, norm_v = math.sqrt(sum(x * x for x in u.values())), math.sqrt(sum(x * x for x in v.values()))
    assert tfidf_similarity(a, b) == pytest.approx(2.0 / (norm_u * norm_v))


def test_ctf_flag_reward():
    assert flag_reward("picoCTF{ABC}", "picoctf{abc}", strict=False) == 1.0
    assert flag_reward("picoCTF{abc} trailing words", "picoCTF{abc}", strict=False) == 1.0
    assert flag_reward(" picoCTF{abc}", "picoCTF{abc}", strict=False) == 0.0, "the original split on one space"
    assert flag_reward(" picoCTF{abc} ", "picoCTF{abc}", strict=True) == 1.0
    assert flag_reward("wrong", "picoCTF{abc}", strict=True) == 0.0
