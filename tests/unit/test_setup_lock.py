"""`./dev` installs requirements.lock as locked, whatever the package index holds that day.

The case that stopped every fresh machine on 2026-12-06: a locked package asks for another with an
extra (litellm: `httpx[http2]>=0.28`), and a newer release of that other package (httpx 0.29.0) was
published after the lock was made. Left to resolve, pip 23 took the newest and hash-checking refused
the install. Here that index is a folder of wheels made by the test, offline: alpha 1.0 asks for
`beta[fast]>=1.0`, the lock says beta 1.0, and the folder also holds beta 1.1. The real `./dev` runs
in a copy of the project's layout (its own `dev` and scripts, a small pyproject and lock of these
wheels, the venv's pip as the interpreter brings it) and must install exactly the locked versions.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from foundation.settings import PROJECT_ROOT

TOY_BACKEND = '''
"""A build backend of a few lines (PEP 517/660), so that the toy project builds offline."""
import os, zipfile

NAME, VERSION = "toy", "0.1"
DIST = f"{NAME}-{VERSION}.dist-info"


def _wheel(directory):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as wheel:
        wheel.writestr(f"{NAME}.pth", os.getcwd() + "\\n")
        wheel.writestr(f"{DIST}/METADATA", f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n")
        wheel.writestr(f"{DIST}/WHEEL", "Wheel-Version: 1.0\\nGenerator: toy\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        wheel.writestr(f"{DIST}/RECORD", "")
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)
'''

TOY_PYPROJECT = '''
[build-system]
requires = []
build-backend = "toy_backend"
backend-path = ["."]

[project]
name = "toy"
version = "0.1"
dependencies = ["alpha==1.0"]

[project.optional-dependencies]
dev = ["toyjust==1.0"]
'''

# `just`, as ./dev runs it at its end: here it prints what is installed
TOYJUST = '''
from importlib.metadata import version

def main():
    print(" ".join(f"{name} {version(name)}" for name in ("alpha", "beta", "gamma")))
'''


def wheel(folder: Path, name: str, version: str, metadata: str = "", files: dict[str, str] | None = None,
          entry_points: str = "") -> Path:
    """A pure-Python wheel with a RECORD of its own files."""
    dist = f"{name}-{version}.dist-info"
    contents = {f"{name}/__init__.py": "", **(files or {}),
                f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}",
                f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if entry_points:
        contents[f"{dist}/entry_points.txt"] = entry_points
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    contents[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    return path


def lock_line(path: Path) -> str:
    name, version = path.name.split("-")[:2]
    return f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}\n"


def offline_index(folder: Path) -> list[Path]:
    """The wheels the lock names, and a newer beta beside them; returns the locked ones."""
    folder.mkdir()
    locked = [
        wheel(folder, "alpha", "1.0", "Requires-Dist: beta[fast]>=1.0\n"),
        wheel(folder, "beta", "1.0", "Provides-Extra: fast\nRequires-Dist: gamma>=1.0; extra == \"fast\"\n"),
        wheel(folder, "gamma", "1.0"),
        wheel(folder, "toyjust", "1.0", files={"toyjust/__init__.py": TOYJUST},
              entry_points="[console_scripts]\njust = toyjust:main\n"),
    ]
    # published after the lock was made: what the index's newest is today
    wheel(folder, "beta", "1.1", "Provides-Extra: fast\nRequires-Dist: gamma>=1.0; extra == \"fast\"\n")
    return locked


def toy_project(root: Path, lock: str) -> Path:
    """The project's `dev` and scripts, with a pyproject and a lock of the toy wheels."""
    (root / "scripts").mkdir(parents=True)
    for name in ("dev", "scripts/check_lock.py", "scripts/install_lock.py"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    (root / "pyproject.toml").write_text(TOY_PYPROJECT)
    (root / "toy_backend.py").write_text(TOY_BACKEND)
    (root / "requirements.lock").write_text(lock)
    return root


def offline_env(wheels: Path) -> dict[str, str]:
    """pip sees only the folder: no index, no configuration of this machine's."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_") and name != "PYTHON"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}


def dev(root: Path, wheels: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / "dev"), *args], cwd=root, env=offline_env(wheels), check=False,
                          capture_output=True, text=True, timeout=300)


def only_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


def test_dev_installs_the_lock_as_locked_whatever_the_index_holds(tmp_path: Path):
    """One project, one venv (its making is most of the time), three locks in turn: a file whose hash
    differs, a lock without gamma, then the right lock, while beta 1.1 sits on the index."""
    folder = tmp_path / "index"
    locked = offline_index(folder)
    right = "".join(map(lock_line, locked))
    root = toy_project(tmp_path / "project", right)
    lock = root / "requirements.lock"

    gamma = hashlib.sha256((folder / "gamma-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    lock.write_text(right.replace(gamma, "0" * 64))
    line = only_line(dev(root, folder))
    assert line.startswith("dev: requirements.lock could not be installed: "), line
    assert "gamma" in line and "is not the one locked" in line and ".venv/install.log" in line, line

    lock.write_text("".join(lock_line(path) for path in locked if "gamma" not in path.name))
    line = only_line(dev(root, folder))
    assert line.startswith("dev: requirements.lock is not complete, its packages ask for others: "), line
    assert "gamma" in line and "./dev lock" in line, line

    lock.write_text(right)
    result = dev(root, folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "alpha 1.0 beta 1.0 gamma 1.0"  # beta 1.1 was on the index
    assert result.stderr == ""
    installed = subprocess.run([str(root / ".venv/bin/python"), "-m", "pip", "list", "--format=freeze"],
                               env=offline_env(folder), check=True, capture_output=True, text=True, timeout=60)
    assert {"beta==1.0", "gamma==1.0", "toy==0.1"} <= set(installed.stdout.split()), installed.stdout
