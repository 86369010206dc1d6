"""docs/architecture.md's walk is the traced one: the episode of tests/walk_trace.py run for real
(the oracle, one Bash starter task, concurrency 1), every row's modules entered, the rows in the
order the trace first enters them, and the figures the doc states the trace's own (files, distinct
steps back, steps up the layers). A change of the path fails here until the doc says it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.walk_trace import DOC, doc_figures, doc_walk, out_of_order, report, trace_episode

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SPREAD = 2


def test_the_doc_s_walk_is_the_traced_one(tmp_path: Path) -> None:
    trace = trace_episode(tmp_path)
    text = DOC.read_text()
    rows = doc_walk(text)
    assert out_of_order(rows, trace) == [], report(trace)
    swapped = rows[:8] + [rows[9], rows[8]] + rows[10:]  # a row moved: found in the real trace too
    assert out_of_order(swapped, trace), "two rows swapped, and the check found nothing"
    files, back, up = len(trace.order), len(trace.back), len(trace.up())
    said = doc_figures(text)
    # steps back give or take SPREAD: the pool's background loops (health, CPU samples) and the
    # engine's watch may run once more or less in a trace of a few seconds
    assert files == said[0] and abs(back - said[1]) <= SPREAD and up == said[2], (
        f"the trace gives {files} files, {back} distinct steps back, {up} steps up; the doc says "
        f"{said[0]}, {said[1]}, {said[2]}:\n{report(trace)}")
    assert up <= 1, trace.up()
