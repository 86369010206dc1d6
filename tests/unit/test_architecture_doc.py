"""docs/architecture.md stays true: every dotted path its episode walk names resolves in the code,
the walk states its traced figures, and the drawing of the parts names every part of the import
contract. That the walk is the traced one is tests/docker/test_traced_walk.py's (it runs it)."""

from __future__ import annotations

import re
import tomllib

import pytest

from foundation.settings import PROJECT_ROOT
from tests.walk_trace import DOC, Trace, doc_figures, doc_walk, file_of, out_of_order, resolve


def test_every_path_of_the_walk_resolves_and_the_walk_states_its_figures() -> None:
    steps = doc_walk(DOC.read_text())
    assert len(steps) >= 15 and all(steps), steps
    for paths in steps:
        for path in paths:
            resolve(path)
    files, back, up = doc_figures(DOC.read_text())
    assert files > len(steps) and back > 0 and up <= 1


def test_a_path_that_stops_resolving_fails_and_so_does_a_moved_row() -> None:
    text = DOC.read_text()
    assert "`orchestrator.sweep.levels.run_sweep`" in text
    with pytest.raises(AssertionError, match="run_sweep_renamed"):
        resolve("orchestrator.sweep.levels.run_sweep_renamed")
    with pytest.raises(AssertionError, match="orchestrator.sweep has no scheduler"):
        resolve("orchestrator.sweep.scheduler.run_sweep")
    rows = doc_walk(text)
    # a trace that entered the rows' modules in the doc's order: nothing to say; two rows swapped: found
    order = [file_of(resolve(paths[0])[0]) for paths in rows]
    trace = Trace(order=list(dict.fromkeys(order + [file_of(resolve(p)[0]) for paths in rows for p in paths])))
    assert out_of_order(rows, trace) == []
    swapped = rows[:3] + [rows[4], rows[3]] + rows[5:]
    assert out_of_order(swapped, trace) == ["row 5: orchestrator/sweep/levels.py is entered before the row above's module"]


def test_the_drawing_names_every_part_of_the_contract() -> None:
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    parts = next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Parts"))
    names = {name.strip() for layer in parts["layers"] for name in re.split(r"[|:]", layer)}
    text = DOC.read_text()
    drawing = text[text.index("## The application's parts"):text.index("## One episode through the code")]
    missing = sorted(name for name in names if not re.search(rf"\b{re.escape(name)}\b", drawing))
    assert not missing, missing
    for name in names:  # each is a module or package of the application
        assert (PROJECT_ROOT / "orchestrator" / name).is_dir() or (PROJECT_ROOT / "orchestrator" / f"{name}.py").is_file()
