"""The layer contract (pyproject.toml, [tool.importlinter]) holds for the project, and a back-import
breaks it: foundation < tasks < environments < agents < application (orchestrator)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    assert "1 kept, 0 broken" in result.stdout


def test_a_back_import_breaks_the_contract(tmp_path: Path):
    for package in PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.txt"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path)
    errors = tmp_path / "foundation" / "errors.py"
    errors.write_text(errors.read_text() + "\nfrom environments.kind import kind_spec  # a back-import\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and "foundation.errors -> environments.kind" in result.stdout, result.stdout
