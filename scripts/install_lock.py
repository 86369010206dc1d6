"""Install requirements.lock into this interpreter's environment exactly as locked, then the project.
Run by `./dev` with the virtualenv's python; standard library only.

    .venv/bin/python scripts/install_lock.py [--root DIR]

The lock is complete: uv wrote every package, direct and indirect, at one version with the hashes of
its files. So nothing is resolved at set-up: `pip install --require-hashes --no-deps --only-binary
:all:` installs its entries and nothing else, and `pip check` then proves that they satisfy one
another (pip's own answer for a lock installed whole). Left to resolve, pip 23 (Debian's
Python 3.11 brings 23.0.1) took a requirement with an extra (litellm's `httpx[http2]>=0.28`) to the
newest release on the index rather than the locked one, and hash-checking refused the whole install:
set-up depended on what the index held that day. `pip check` does not look at what an extra asks
for, so the lock is also resolved again against what is installed, with no index (`--dry-run`): a
package the lock lacks is named. `--only-binary` keeps a build (and the newest
build backend it would fetch) out of it; the project itself is installed with the lock's setuptools
and no build isolation, for the same reason. A failure is one line on stderr, pip's whole output in
`.venv/install.log`, exit 1.

The lock's files are put in by uv when the lock names it (it does: `./dev lock` is uv): pip first
installs uv itself from the lock's own line (its version and hashes), then `uv pip install` the same
flags (`--require-hashes --no-deps --only-binary :all:`, bytecode compiled as pip does), in about
20 s where pip took 90 to 120 from a clean cache. Nothing else changes: the same files, checked
against the same hashes, then checked whole by pip as above. Where uv fails (it does not read pip's
configuration: an index only pip.conf names, a proxy), pip installs the lock as before and says why.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_lock  # noqa: E402  (beside this file; standard library only)

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
TIMEOUT_S = 1800  # a whole install over a slow index; a hung one is stopped
LOG = "install.log"


class Failed(Exception):
    """One line for the user: what went wrong and what to do."""


def logged(log: Path, shown: list[str], command: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`command` with its output appended to the log under `$ shown`, never on the screen."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(shown)}\n")
        out.flush()
        try:
            return subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True,
                                  check=False, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Failed(f"{' '.join(shown[:2])} did not end within {TIMEOUT_S // 60} min (the package index hung?): "
                         f"check that it answers (`pip config list` names it) and run ./dev again") from None


def pip(log: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pip, logged."""
    return logged(log, ["pip", *args], [*PIP, *args], cwd=cwd)


def pip_error(log: Path) -> str:
    """pip's own error of its last command, in one line."""
    last = log.read_text(errors="replace").rsplit("\n$ pip ", 1)[-1]
    lines = [line.strip() for line in last.splitlines()]
    start = next((i for i, line in enumerate(lines) if line.startswith("ERROR:")), None)
    if start is None:
        text = " ".join(line for line in lines[-3:] if line)
    else:  # the ERROR line and what pip indented under it
        text = " ".join(line for line in lines[start:start + 4] if line and not line.startswith("WARNING:"))
    text = re.sub(r"\s+", " ", text.removeprefix("ERROR: "))
    return text if len(text) <= 300 else text[:297] + "..."


def advice(error: str) -> str:
    if "DO NOT MATCH THE HASHES" in error:
        return ("a file the package index served is not the one locked (a re-published release or a mirror "
                "that changed it): point pip at an index that serves the locked files, or run `./dev lock` "
                "to lock what the index has now")
    if "No matching distribution" in error or "Could not find a version" in error:
        return ("the package index does not serve a locked release as a wheel for this machine, or does not "
                "answer: check that it answers (`pip config list` names it) and run ./dev again")
    return "fix what it says and run ./dev again"


def install(root: Path) -> None:
    log = Path(sys.prefix) / LOG
    log.write_text("")
    lock = root / check_lock.LOCK
    if not by_uv(log, lock, cwd=root) and pip(log, "install", "--require-hashes", "--no-deps", "--only-binary", ":all:",
                                            "-r", str(lock), cwd=root).returncode:
        error = pip_error(log)
        raise Failed(f"{check_lock.LOCK} could not be installed: {error} ({advice(error)}; pip's output: {log})")
    # Complete: resolved again against what is now installed, with no index, nothing must be missing
    # (pip check alone doesn't look at what an extra asks for: `beta[fast]` needing gamma).
    resolved = pip(log, "install", "--no-index", "--dry-run", "--require-hashes", "--only-binary", ":all:",
                   "-r", str(lock), cwd=root)
    wanted = re.findall(r"^Would install (.+)$", log.read_text(errors="replace"), re.MULTILINE)
    if resolved.returncode or wanted or pip(log, "check", cwd=root).returncode:
        missing = f"it also needs {wanted[-1]}" if wanted and not resolved.returncode else pip_error(log)
        raise Failed(f"{check_lock.LOCK} is not complete, its packages ask for others: {missing} "
                     f"(run `{check_lock.REFRESH}`; pip's output: {log})")
    extra = check_lock.unlocked(lock.read_text(), (root / "pyproject.toml").read_text())
    if extra:
        print(f"dev: removing what {check_lock.LOCK} doesn't name: {' '.join(extra)}", file=sys.stderr)
        if pip(log, "uninstall", "--yes", *extra, cwd=root).returncode:
            raise Failed(f"could not remove {' '.join(extra)}: {pip_error(log)} (pip's output: {log})")
    if pip(log, "install", "--no-deps", "--no-build-isolation", "-e", ".", cwd=root).returncode:
        raise Failed(f"the project could not be installed: {pip_error(log)} (pip's output: {log})")


def uv_line(lock_text: str) -> str | None:
    """The lock's own entry for uv (`uv==X --hash=... ...`, continuation lines joined), None without one."""
    for entry in lock_text.replace("\\\n", " ").splitlines():
        if re.match(r"\s*uv==\S+\s+--hash=", entry):
            return " ".join(entry.split(" #", 1)[0].split())
    return None


def by_uv(log: Path, lock: Path, *, cwd: Path) -> bool:
    """Install the lock's files with uv, itself installed from the lock's line for it; False (the
    reason in the log) where that can't be done, for pip to do it."""
    line = uv_line(lock.read_text())
    if line is None:
        return False
    pinned = Path(sys.prefix) / "uv-requirement.txt"
    pinned.write_text(line + "\n")
    if pip(log, "install", "--require-hashes", "--no-deps", "--only-binary", ":all:", "-r", str(pinned),
           cwd=cwd).returncode:
        return False
    args = ["pip", "install", "--python", sys.executable, "--require-hashes", "--no-deps", "--only-binary", ":all:",
            "--compile-bytecode", "-r", str(lock)]
    try:
        done = logged(log, ["uv", *args], [str(Path(sys.prefix) / "bin" / "uv"), *args], cwd=cwd)
    except OSError as exc:  # the uv just installed does not run here
        with log.open("a") as out:
            out.write(f"uv: {exc}\n")
        done = None
    if done is None or done.returncode:
        print(f"dev: uv could not install {check_lock.LOCK} (its output: {log}); pip installs it instead",
              file=sys.stderr)
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    try:
        install(args.root.resolve())
    except Failed as failure:
        print(f"dev: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
