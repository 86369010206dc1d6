"""docs/architecture.md stays true: every dotted path its episode walk names resolves in the code,
no module comes back once the walk has left it, no step's module calls into an earlier step's, and
the drawing of the parts names every part of the import contract."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import tomllib
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "architecture.md"


def walk(text: str) -> list[list[str]]:
    """The dotted paths each step of the doc's walk names, in order."""
    section = text[text.index("## One episode through the code"):]
    section = section[:section.index("\n## ")]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    return [re.findall(r"`([a-z_]+(?:\.\w+)+)`", row.rsplit("|", 2)[1]) for row in rows]


def resolve(path: str) -> tuple[str, object]:
    """The module a dotted path is in and the object it names: the longest prefix that imports
    as a module, then attributes. AssertionError naming the path when it does not resolve."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        found: object = spec
        if parts[cut:]:  # a module named alone is found, not run (orchestrator.__main__)
            found = importlib.import_module(name)
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"{path}: {name} has no {attribute}"
            found = getattr(found, attribute)
        return name, found
    raise AssertionError(f"{path}: no such module")


def modules_of(steps: list[list[str]]) -> list[list[str]]:
    return [[resolve(path)[0] for path in paths] for paths in steps]


def revisits(steps: list[list[str]]) -> list[str]:
    """Modules the walk comes back to after it has left them."""
    left: set[str] = set()
    current: set[str] = set()
    found = []
    for modules in modules_of(steps):
        step = set(modules)
        found += [f"{module} comes back in the walk" for module in sorted(step & left)]
        left |= current - step
        current = step
    return found


def calls_back(steps: list[list[str]]) -> list[str]:
    """Calls from a step's module into a function it imports from the module of an earlier step (a
    class called makes a value of that step's type: fine)."""
    found = []
    earlier: set[str] = set()
    for modules in modules_of(steps):
        for module in dict.fromkeys(modules):
            spec = importlib.util.find_spec(module)
            assert spec is not None and spec.origin is not None, module
            tree = ast.parse(Path(spec.origin).read_text())
            imported = {(alias.asname or alias.name): node.module for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) and node.module in earlier - {module}
                        for alias in node.names}
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    callee = node.func.value if isinstance(node.func, ast.Attribute) else node.func
                    if (isinstance(callee, ast.Name) and callee.id in imported
                            and not inspect.isclass(getattr(importlib.import_module(imported[callee.id]), callee.id))):
                        found.append(f"{module}:{node.lineno} calls {imported[callee.id]}.{callee.id}")
        earlier |= set(modules)
    return found


def test_every_path_of_the_walk_resolves_and_the_walk_never_goes_back():
    steps = walk(DOC.read_text())
    assert len(steps) >= 15 and all(steps), steps
    assert revisits(steps) == []
    assert calls_back(steps) == []


def test_a_path_that_stops_resolving_fails_and_so_does_a_walk_that_goes_back():
    text = DOC.read_text()
    assert "`orchestrator.sweep.levels.run_sweep`" in text
    with pytest.raises(AssertionError, match="run_sweep_renamed"):
        modules_of(walk(text.replace("`orchestrator.sweep.levels.run_sweep`", "`orchestrator.sweep.levels.run_sweep_renamed`")))
    with pytest.raises(AssertionError, match="orchestrator.sweep has no scheduler"):
        modules_of(walk(text.replace("`orchestrator.sweep.levels.run_sweep`", "`orchestrator.sweep.scheduler.run_sweep`")))
    steps = walk(text)
    assert revisits(steps + [["orchestrator.sweep.levels.run_sweep"]]) == ["orchestrator.sweep.levels comes back in the walk"]
    # the episode function before the runner: the runner then calls `run_episode`, of a step before it
    index = {paths[0]: n for n, paths in enumerate(steps)}
    runner, episode = index["orchestrator.sweep.runner.EpisodeRunner.run"], index["agents.episode.run_episode"]
    assert episode == runner + 1
    swapped = steps[:runner] + [steps[episode], steps[runner]] + steps[episode + 1:]
    assert [line for line in calls_back(swapped) if line.startswith("orchestrator.sweep.runner")] == [
        f"orchestrator.sweep.runner:{line} calls agents.episode.run_episode" for line in episode_calls()]


def episode_calls() -> list[int]:
    tree = ast.parse((PROJECT_ROOT / "orchestrator" / "sweep" / "runner.py").read_text())
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run_episode"]


def test_the_drawing_names_every_part_of_the_contract():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    parts = next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Parts"))
    names = {name.strip() for layer in parts["layers"] for name in re.split(r"[|:]", layer)}
    text = DOC.read_text()
    drawing = text[text.index("## The application's parts"):text.index("## One episode through the code")]
    missing = sorted(name for name in names if not re.search(rf"\b{re.escape(name)}\b", drawing))
    assert not missing, missing
    for name in names:  # each is a module or package of the application
        assert (PROJECT_ROOT / "orchestrator" / name).is_dir() or (PROJECT_ROOT / "orchestrator" / f"{name}.py").is_file()
