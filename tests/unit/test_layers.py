"""The import contracts (pyproject.toml, [tool.importlinter]) hold for the project, and an import
against each breaks it: the layers (foundation < tasks < environments < agents < application),
the application's parts (commands > view > nightly > sweep > fidelity | cluster > report | site >
store > tasksets > images | output_files) and one reader of a store (nothing but
the store imports sqlite3; nightly's own history database aside)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT

PACKAGES = ("icdriver", "foundation", "tasks", "environments", "agents", "orchestrator")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(executable), "--no-cache"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_project_keeps_its_layers():
    result = lint_imports(PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def copy_of_the_project(root: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, root / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.txt"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", root)
    return root


@pytest.mark.parametrize(("module", "line", "contract", "finding"), [
    # a layer imports one above it
    ("foundation/errors.py", "from environments.kind import kind_spec", "Layers: application > agents",
     "foundation.errors -> environments.kind"),
    # the cluster imports the sweep (the cycle the Site protocol's own module ended)
    ("orchestrator/cluster/site.py", "from orchestrator.sweep.local_site import LocalSite", "Parts: commands",
     "orchestrator.cluster.site -> orchestrator.sweep.local_site"),
    # two parts of one layer are independent: fidelity does not import the cluster
    ("orchestrator/fidelity/replay.py", "from orchestrator.cluster.remote import RemoteEnvironment", "Parts: commands",
     "orchestrator.fidelity.replay -> orchestrator.cluster.remote"),
    # a part's command module imports the CLI on top (it registers itself; the CLI imports it)
    ("orchestrator/store/cli.py", "from orchestrator.cli import main", "Parts: commands",
     "orchestrator.store.cli -> orchestrator.cli"),
    # the viewer queries results.db itself instead of through the store
    ("orchestrator/view/lists.py", "import sqlite3", "One reader of a store", "orchestrator.view.lists -> sqlite3"),
    # nightly's history may open its own database; the rest of nightly may not
    # nor does a layer below the application
    ("environments/sql.py", "import sqlite3", "One reader of a store", "environments.sql -> sqlite3"),
    ("orchestrator/nightly/gate.py", "from sqlite3 import connect", "One reader of a store",
     "orchestrator.nightly.gate -> sqlite3"),
    # a pure reward takes a value type from the pool's driver (which imports the Docker client)
    ("environments/rewards/python.py", "from foundation.pool.driver import PythonResult", "A Docker-free seam",
     "environments.rewards.python -> foundation.pool.driver"),
    # the local sandbox reaches the engine through a module of its own
    ("foundation/local.py", "from foundation.engine import engine_call", "A Docker-free seam",
     "foundation.local -> foundation.engine"),
])
def test_an_import_against_a_contract_breaks_it(tmp_path: Path, module: str, line: str, contract: str,
                                                finding: str) -> None:
    root = copy_of_the_project(tmp_path)
    path = root / module
    path.write_text(path.read_text() + f"\n{line}  # against the contract\n")
    result = lint_imports(root)
    assert result.returncode != 0
    assert re.search(r"Contracts: \d kept, [12] broken", result.stdout), result.stdout  # a layer's break may break the seam too
    broken = result.stdout[result.stdout.index("Broken contracts"):]
    assert contract in broken and finding in broken, broken
