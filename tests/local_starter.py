"""The starter tasks on a Docker-free sandbox (foundation/local.py): the starter image's /starter
tree as seed files under `starter/`, and the Bash tasks with their paths made relative, since a
local sandbox's "/" is its temporary directory. Python and CTF tasks run as they are (the Python
environment needs no files; the CTF tests only submit flags). SQL needs MariaDB: not here.

    async with local_runtime() as runtime:
        task = starter("bash", 0)          # "grep -c ERROR starter/logs/app.log"
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from environments.own import own_kind
from environments.runtime import Runtime
from foundation.local import LocalProvider
from tasks import Task, load_tasks
from tasks.own import read_environment

IMAGE = "local/starter"
# images/starter/make-fs.sh's /starter, file for file (empty directories aside).
SEED = {
    "starter/logs/app.log": "2024-01-02 10:00:01 INFO start\n2024-01-02 10:00:05 ERROR disk full\n"
                            "2024-01-02 10:01:00 WARN retry\n2024-01-02 10:02:13 ERROR timeout\n"
                            "2024-01-02 10:03:00 INFO done\n",
    "starter/logs/old.log": "2024-01-01 09:00:00 INFO boot\n",
    "starter/src/main.py": "import lib.util\n\nprint(lib.util.double(21))\n",
    "starter/src/lib/util.py": "def double(x):\n    return 2 * x\n",
    "starter/src/lib/__init__.py": "",
    "starter/data/scores.csv": "id,name,score\n1,ada,91\n2,grace,88\n3,linus,75\n",
    "starter/data/cities.csv": "id,city\n1,London\n2,New York\n",
    "starter/notes/todo.txt": "buy milk\nfix the build\n",
    "starter/notes/blank.txt": "",
}


def relative(text: str) -> str:
    return text.replace("/starter", "starter")


def starter(kind: str, index: int = 0) -> Task:
    """A starter task as a local sandbox runs it."""
    task = load_tasks(f"starter-{kind}")[index]
    if kind != "bash":
        return task
    return replace(task, query=relative(task.query), gold=relative(task.gold_text), image=IMAGE)


@asynccontextmanager
async def local_runtime() -> AsyncIterator[Runtime]:
    async with Runtime.local(LocalProvider({IMAGE: SEED})) as runtime:
        yield runtime


def environment_of_your_own(root: Path, manifest: str, tasks: str, reward: str) -> list[Task]:
    """An environment directory of yours written at `root` (environment.toml, tasks.jsonl,
    reward.py, a Dockerfile no local sandbox builds), its kind registered as a sweep's task set
    registers it; its tasks."""
    for name, text in (("environment.toml", manifest), ("tasks.jsonl", tasks), ("reward.py", reward),
                       ("Dockerfile", "FROM scratch\n")):
        (root / name).write_text(text)
    own = read_environment(root)
    own_kind(own)
    return own.tasks()
