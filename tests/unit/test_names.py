"""Names that say which thing (issue 28): two modules of the project share a name only when they
are the same kind of thing in their packages (each part's `cli`, each layer's `base`, a kind's
environment and its reward under `environments/rewards/`, the task readers and the environments
of one task format). A new module named like another of another kind fails here."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

from foundation.settings import PROJECT_ROOT

# name -> why the modules of that name are one kind of thing
SAME_KIND = {
    "__init__": "packages",
    "__main__": "entry points",
    "cli": "each part's command line",
    "base": "each layer's base classes",
    "errors": "each layer's errors",
    "settings": "settings",
    "config": "configuration models",
    "server": "servers (the local LLM server, the in-container driver)",
    "site": "the Site protocol and the cluster's Site",
    "gym": "gymnasium wrappers",
    "report": "fidelity reports",
    "bash": "the Bash kind: its environment and its reward",
    "sql": "the SQL kind: its environment and its reward",
    "python": "the Python kind: its environment and its reward",
    "own": "environments of your own: the reader of their folder and their kind",
    "harbor": "Harbor task folders: their reader and their kind",
}


def modules_by_name(paths: list[str]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        by_name[Path(path).stem].append(path)
    return {name: places for name, places in by_name.items() if len(places) > 1}


def project_modules() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return [path for path in listed if not path.startswith("tests/")]  # tests/ and task fixtures: not the product


def test_no_two_modules_of_different_kinds_share_a_name() -> None:
    shared = modules_by_name(project_modules())
    assert shared, "git ls-files found no repeated name at all (not even __init__): wrong directory?"
    unexplained = {name: places for name, places in shared.items() if name not in SAME_KIND}
    assert unexplained == {}, f"modules named alike but of different kinds: rename one ({unexplained})"


def test_a_second_models_module_would_be_found() -> None:
    paths = [*project_modules(), "orchestrator/sweep/models.py"]
    shared = modules_by_name(paths)
    assert "models" in shared and "models" not in SAME_KIND
    assert sorted(shared["models"]) == ["agents/models.py", "orchestrator/sweep/models.py"]
