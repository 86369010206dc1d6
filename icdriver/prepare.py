"""`icdriver.pyz prepare`: our layer's build step over an image of yours (images/own/Dockerfile),
run by the driver's own runtime, so that it needs nothing of the image (no shell, no python3).

It points /usr/lib/intercode/python3 at the interpreter the driver will run on (the image's python3,
when IC_PYTHON=image and it has a recent one: the agent's Python code then sees the image's packages;
else ours, isolated from the image's PYTHON* variables) and /usr/lib/intercode/bash at the image's bash
(else ours); commits the root to git when IC_COMMIT_ROOT=1; then takes the pristine snapshot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping

from icdriver.restore import CONFIG, Config, snapshot
from icdriver.users import USER_FILE

HOME = "/usr/lib/intercode"
RUNTIME = HOME + "/runtime/bin"
LAUNCHER = "#!%s/bash\nexec %s/python3 -I \"$@\"\n" % (RUNTIME, RUNTIME)  # -I: the image's PYTHONHOME can't reach it
OLDEST = (3, 9)  # the oldest Python the driver runs on


def prepare(environ: Mapping[str, str] | None = None) -> None:
    environ = os.environ if environ is None else environ
    path = environ.get("PATH", os.defpath)
    bash = "/bin/bash" if os.access("/bin/bash", os.X_OK) else shutil.which("bash", path=path)
    link(HOME + "/bash", bash or RUNTIME + "/bash")
    python = shutil.which("python3", path=path) if environ.get("IC_PYTHON") == "image" else None
    if python and recent(python):
        link(HOME + "/python3", python)
    else:
        write(HOME + "/python3", LAUNCHER, 0o755)
    write(USER_FILE, environ.get("IC_USER", "") + "\n", 0o644)  # the image's USER, for the driver (icdriver/users.py)
    if not os.path.exists(CONFIG):
        write(CONFIG, json.dumps(Config(system=[])) + "\n", 0o644)
    if environ.get("IC_COMMIT_ROOT") == "1":
        subprocess.run([HOME + "/bash", HOME + "/prepare.sh"], check=True)
    snapshot()


def recent(python: str) -> bool:
    check = "import sys; sys.exit(sys.version_info[:2] < %r)" % (OLDEST,)
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def link(path: str, target: str) -> None:
    if os.path.lexists(path):
        os.remove(path)
    os.symlink(target, path)


def write(path: str, text: str, mode: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    os.chmod(path, mode)
