"""The type checker holds the project's seams: mypy, configured in pyproject.toml ([tool.mypy]:
strict on every package, the in-container driver included), finds nothing; and a
broken seam is a finding (a sandbox provider without `warm`, a strategy calling a method its
environment lacks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow


def mypy(root: Path, cache: Path, *packages: str) -> subprocess.CompletedProcess[str]:
    """mypy as configured (every package), or on `packages` and what they import."""
    chosen = [argument for package in packages for argument in ("-p", package)]
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *chosen], cwd=root,
                          capture_output=True, text=True, timeout=900)


def kept_cache() -> Path:
    """mypy's cache, kept outside the checkout so that a clean clone starts warm (40 s cold, 2 s warm
    on the reference machine): mypy checks each cached module against its file's hash, so one cache
    serves every checkout."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "intercode-orchestrator" / "mypy"


def test_the_type_checker_finds_nothing():
    result = mypy(PROJECT_ROOT, kept_cache())
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


def test_a_broken_seam_is_a_finding(tmp_path: Path):
    for package in ("icdriver", "foundation"):  # foundation imports nothing else of ours
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.txt"))
    shutil.copy(PROJECT_ROOT / "pyproject.toml", tmp_path)
    local = tmp_path / "foundation" / "local.py"  # LocalProvider, a SandboxProvider, loses `warm`
    text = local.read_text()
    assert "    async def warm(" in text
    local.write_text(text.replace("    async def warm(", "    async def warm_up("))
    cache = tmp_path / "cache"  # a copy of the kept cache: only the changed module and its dependents are checked
    if kept_cache().is_dir():
        shutil.copytree(kept_cache(), cache)
    result = mypy(tmp_path, cache, "foundation")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "foundation/local.py" in result.stdout and "SandboxProvider" in result.stdout, result.stdout
