"""Is requirements.lock in step with pyproject.toml? One rule, used by `./dev` before it installs and
by tests/unit/test_lockfile.py. Standard library only: `./dev` runs it before the virtualenv exists.

    python scripts/check_lock.py [--root DIR]    exit 1 with one line when the lock is stale
    python scripts/check_lock.py --unlocked      the installed distributions the lock doesn't name

Every dependency of pyproject.toml (runtime and every extra: `dev` holds the others' pins too) must be
in the lock, at its pin when pyproject pins it with `==`, and every entry of the lock must carry a `--hash`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

LOCK = "requirements.lock"
REFRESH = "./dev lock"
# A requirement's name, its extras and its exact pin: "litellm==1.106.2", "httpx[http2] == 0.28.1 ; ..."
REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:===?\s*([^\s;,\\]+))?")
VENV_OWN = {"pip", "setuptools"}  # what `python -m venv` puts in, never in a lock


class Entry(NamedTuple):
    version: str | None
    hashed: bool


def normalize(name: str) -> str:
    """PEP 503: `PyMySQL`, `pymysql` and `py_mysql` name one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject_text: str) -> dict[str, str | None]:
    """pyproject's dependencies and its extras: name -> exact pin (None when not `==`)."""
    project = tomllib.loads(pyproject_text)["project"]
    extras = project.get("optional-dependencies", {}).values()
    requirements = project.get("dependencies", []) + [r for extra in extras for r in extra]
    return {normalize(match[1]): match[2] for match in map(REQUIREMENT.match, requirements) if match}


def locked(lock_text: str) -> dict[str, Entry]:
    """The lock's entries (pip's requirements format, continuation lines joined): name -> Entry."""
    entries = {}
    for line in lock_text.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        match = REQUIREMENT.match(line)
        if line and not line.startswith(("#", "-")) and match:
            entries[normalize(match[1])] = Entry(match[2], "--hash=" in line)
    return entries


def problem(pyproject_text: str, lock_text: str) -> str | None:
    """One line saying how the lock disagrees with pyproject and what refreshes it; None when it agrees."""
    entries = locked(lock_text)
    stale = []
    for name, pin in declared(pyproject_text).items():
        entry = entries.get(name)
        if entry is None:
            stale.append(f"{name}: {pin or 'wanted'} in pyproject, missing from the lock")
        elif pin is not None and entry.version != pin:
            stale.append(f"{name}: {pin} in pyproject, {entry.version} in the lock")
    if stale:
        return f"{LOCK} is out of date with pyproject.toml ({'; '.join(stale)}): run `{REFRESH}`"
    loose = [name for name, entry in entries.items() if not (entry.hashed and entry.version)]
    if loose:
        return f"{LOCK} has entries without an exact pin and a --hash ({', '.join(loose)}): run `{REFRESH}`"
    return None


def unlocked(lock_text: str, pyproject_text: str) -> list[str]:
    """The distributions installed beside this interpreter that neither the lock nor the venv names."""
    keep = set(locked(lock_text)) | VENV_OWN | {normalize(tomllib.loads(pyproject_text)["project"]["name"])}
    installed = {normalize(dist.metadata["Name"]) for dist in importlib.metadata.distributions()}
    return sorted(installed - keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--unlocked", action="store_true", help="print what the lock doesn't name")
    args = parser.parse_args()
    lock, pyproject = args.root / LOCK, (args.root / "pyproject.toml").read_text()
    if not lock.is_file():
        print(f"{LOCK} is missing: run `{REFRESH}`", file=sys.stderr)
        return 1
    if args.unlocked:
        print(" ".join(unlocked(lock.read_text(), pyproject)))
        return 0
    verdict = problem(pyproject, lock.read_text())
    if verdict:
        print(verdict, file=sys.stderr)
    return 1 if verdict else 0


if __name__ == "__main__":
    sys.exit(main())
