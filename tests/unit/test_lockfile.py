"""requirements.lock agrees with pyproject.toml (every pin, the `dev` extra included) and hashes every
entry; a stale lock is caught by the check and by `./dev`, which then installs nothing. No network:
the check compares the two files, it doesn't resolve again (scripts/check_lock.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from foundation.settings import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "check_lock.py"
PYPROJECT = (PROJECT_ROOT / "pyproject.toml").read_text()
LOCK = (PROJECT_ROOT / "requirements.lock").read_text()


def load_check_lock() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_lock", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_lock = load_check_lock()


def project_copy(root: Path, pyproject: str, *files: str) -> Path:
    """A project of the lock, the given pyproject text and `files` copied from ours."""
    (root / "scripts").mkdir(parents=True)
    for name in ("scripts/check_lock.py", "requirements.lock", *files):
        shutil.copy(PROJECT_ROOT / name, root / name)
    (root / "pyproject.toml").write_text(pyproject)
    return root


def test_the_lock_agrees_with_pyproject():
    verdict = check_lock.problem(PYPROJECT, LOCK)
    assert verdict is None, verdict


def test_every_lock_entry_is_pinned_and_hashed():
    entries = check_lock.locked(LOCK)
    assert entries["litellm"] == ("1.106.2", True) and len(entries) > 50, "the lock was not parsed"
    loose = [name for name, entry in entries.items() if not (entry.version and entry.hashed)]
    assert not loose, f"entries without an exact pin and a --hash: {loose}: run `./dev lock`"
    assert LOCK.count("--hash=sha256:") >= len(entries)


def test_a_changed_pin_is_caught(tmp_path: Path):
    stale = re.sub(r'"litellm(\[\w+\])?==[^"]+"', '"litellm==1.100.5"', PYPROJECT)
    assert stale != PYPROJECT
    result = subprocess.run([sys.executable, str(SCRIPT), "--root", str(project_copy(tmp_path, stale))],
                            check=False, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stderr == ("requirements.lock is out of date with pyproject.toml (litellm: 1.100.5 in pyproject, "
                             "1.106.2 in the lock): run `./dev lock`\n")


def test_a_new_dev_dependency_and_a_missing_hash_are_caught():
    stale = PYPROJECT.replace('"pytest==9.2.0",', '"pytest==9.2.0", "pytest-timeout==2.4.0",')
    assert check_lock.problem(stale, LOCK) == ("requirements.lock is out of date with pyproject.toml "
                                               "(pytest-timeout: 2.4.0 in pyproject, missing from the lock): "
                                               "run `./dev lock`")
    unhashed = LOCK.replace("aiodocker==0.27.0 \\", "aiodocker==0.27.0\n#", 1)
    assert check_lock.problem(PYPROJECT, unhashed) == (
        "requirements.lock has entries without an exact pin and a --hash (aiodocker): run `./dev lock`")


def test_a_changed_pin_in_another_extra_is_caught():
    stale = PYPROJECT.replace('inspect = ["inspect_ai==0.3.285"]', 'inspect = ["inspect_ai==0.3.300"]')
    assert stale != PYPROJECT
    assert check_lock.problem(stale, LOCK) == ("requirements.lock is out of date with pyproject.toml "
                                               "(inspect-ai: 0.3.300 in pyproject, 0.3.285 in the lock): run `./dev lock`")


def test_dev_refuses_a_stale_lock_before_installing(tmp_path: Path):
    root = project_copy(tmp_path, PYPROJECT.replace('"rich==15.0.0"', '"rich==13.9.4"'), "dev")
    env = {name: value for name, value in os.environ.items() if name != "PYTHON"}
    result = subprocess.run(["bash", str(root / "dev"), "--list"], check=False, capture_output=True, text=True,
                            env=env, timeout=30)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == ("requirements.lock is out of date with pyproject.toml (rich: 13.9.4 in pyproject, "
                             "15.0.0 in the lock): run `./dev lock`\n")
    assert not (root / ".venv").exists()
