"""The action sequences both sides are driven with, grouped into suites.

A suite is what one harness of each side runs from start to end, in order: one data file's tasks
in one lifecycle (for Bash, the original's two long-lived containers, reset with git). Three
sources:

- `gold`: every task's gold command, one episode each (for CTF: `submit FLAG`);
- `recording`: every action of every episode of a shared trajectory file, in the file's order;
  turns the recording shows as the retry message executed nothing in the original harness and
  are left out;
- `variant`: generated Bash episodes that stress what differs between implementations most
  easily: ordering ties, permission bits, background processes, archive timestamps, file ages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder, read_episodes
from tasks import DATASETS, Task, load_tasks

# The retry messages of the original's prompt templates: the harness ran nothing on such a turn.
RETRY = re.compile(r"^(Format your .* as follows|No (\w+ )?code|Your output did not contain)", re.IGNORECASE)
ENVS = ("bash", "sql", "python", "ctf")
SOURCES = ("gold", "recording", "variant")
GOLD_DATASETS = {"bash": ["nl2bash-fs1", "nl2bash-fs2", "nl2bash-fs3", "nl2bash-fs4"], "sql": ["spider"],
                 "python": ["mbpp"], "ctf": ["ctf"]}


@dataclass(frozen=True)
class Case:
    """One episode: a task and the actions played in it."""

    key: str
    task: Task
    actions: tuple[str, ...]


@dataclass(frozen=True)
class Suite:
    name: str
    kind: str
    source: str
    dataset: str  # ours; its file is the original's data_path
    cases: tuple[Case, ...]

    def data_path(self, data_dir: Path) -> Path:
        return data_dir / DATASETS[self.dataset].path

    @property
    def turns(self) -> int:
        return sum(len(case.actions) for case in self.cases)


def gold_action(task: Task) -> str:
    return f"submit {task.gold_text}" if task.kind == "ctf" else task.gold_text


def gold_suites(kind: str, data_dir: Path, limit: int | None) -> list[Suite]:
    suites = []
    for dataset in GOLD_DATASETS[kind]:
        tasks = [t for t in load_tasks(dataset, data_dir) if not t.meta.get("unavailable")][:limit]
        cases = tuple(Case(f"{dataset}#{t.index}", t, (gold_action(t),)) for t in tasks)
        suites.append(Suite(f"gold-{dataset}", kind, "gold", dataset, cases))
    return suites


def recording_suites(kind: str, data_dir: Path, limit: int | None) -> list[Suite]:
    finder = TaskFinder(data_dir)
    suites = []
    paths = [*(data_dir / "trajectories" / kind).glob("*.json"), *(data_dir / "trajectories" / "more" / kind).glob("*.json")]
    for path in sorted(paths):  # the GPT-4 recordings, then the paper's other models' (more/)
        cases = [case for episode in read_episodes(path)[:limit] if (case := _recorded(finder, episode))]
        if cases:
            suites.append(Suite(f"rec-{path.stem}", kind, "recording", cases[0].task.dataset, tuple(cases)))
    return suites


def _recorded(finder: TaskFinder, episode: RecordedEpisode) -> Case | None:
    task = finder.find(episode)
    if task is None or task.meta.get("unavailable"):
        return None
    actions = tuple(_as_run(task, turn.action) for turn in episode.turns
                    if not (isinstance(turn.observation, str) and RETRY.match(turn.observation)))
    return Case(f"{task.dataset}#{task.index}@{episode.key}", task, actions) if actions else None


def _as_run(task: Task, action: str) -> str:
    """The older CTF harness wrote shell commands as `cmd ...`; both sides get the command."""
    if task.kind == "ctf" and action.strip().startswith("cmd "):
        return action.strip()[4:]
    return action


# Generated Bash episodes: (dataset, task index, actions). Each runs in its file system's suite,
# after the others in it, so the leaks of the original's reset (modes, mtimes) pile up as in a run.
VARIANTS: dict[str, list[tuple[int, tuple[str, ...]]]] = {
    "nl2bash-fs1": [
        # permission bits: git records only the executable bit; the reset leaks the rest
        (8, ("chmod 600 /testbed/hello.php", "find /testbed -name '*.php' -perm 600",
             "find /testbed -name \"*.php\" -exec chmod 755 {} \\; -exec /bin/echo {} \\; | wc -l")),
        (27, ("stat -c '%a %n' /testbed/hello.php", "chmod 700 /testbed/dir1", "ls -ld /testbed/dir1")),
        (0, ("chmod 000 /testbed/Hello.java", "ls -l /testbed | head -4",
             "md5sum /testbed/*.java | awk '{print $1}' | sort | uniq -d")),
        # background processes: still running, or finishing, when the reward looks
        (11, ("find /testbed -type f  -mtime +7 | tee compressedP.list | xargs -I{} -P10 compress {} &",
              "sleep 1; ls /testbed | head", "(sleep 2; touch /testbed/late.txt) &", "ls /testbed/late.txt")),
        (2, ("nohup sh -c 'sleep 3; echo done > /testbed/bg.txt' > /dev/null 2>&1 &", "sleep 4; cat /testbed/bg.txt")),
        # archive timestamps: gzip and tar store mtimes (and gzip its own clock), so hashes differ
        (45, ("find /testbed -mindepth 1 -maxdepth 1 -type d | xargs tar czf /backup1.tar --transform 's,^testbed/,,'",
              "tar czf /testbed/dir1.tgz /testbed/dir1", "gzip -k /testbed/textfile7.txt")),
        (46, ("find /var/log/ -mtime +1 | xargs  tar -czvPf  /testbed/logs.tar.gz",
              "tar cf /testbed/a.tar /testbed/dir2")),
        # ordering ties: files written in the same instant sort by name in one and not the other
        (31, ("ls -t /testbed", "ls -lt /testbed/dir1 | awk '{print $9}'",
              "touch /testbed/a /testbed/b; ls -t /testbed | head -3")),
        # `skip`: the original's harness stepped `submit` after it too, and recorded that reward
        (29, ("find /testbed/ -name 'foo??' | sort | xargs wc -l", "skip")),
        # file ages
        (47, ("find /testbed -mmin -5", "find /testbed -type f -mmin +5 | sort | head",
              "find /testbed -atime -1 | sort | head",
              "find /testbed/dir3/subdir1/subsubdir1/tmp -type f -mtime +2 -print0 | xargs -0 rm -f")),
    ],
    "nl2bash-fs2": [
        (37, ("find /system -type f | xargs ls -ltr | tail -n 1", "ls -lt /system/folder1 | head -3")),
        (48, ("tar -zcvf compress_folder1.tar.gz /system/folder1",
              "gzip -k /system/folder1/*.txt; ls /system/folder1")),
        (39, ("tar czvf mytarfile.tgz `find /system/folder1 -mtime -60`",)),
        (18, ("find /system/folder1 -maxdepth 1 -mmin +5 -type f -name \"*.txt\" -delete",
              "find /system -mmin -60 | sort")),
        (32, ("chmod 640 /system/folder1/*", "find /system -type f -mtime +31 -exec rm -f {} \\;")),
        (17, ("sleep 30 &", "find /system/folder3/backup_dbg/*.sql -mtime +25 -exec rm -f {} \\;")),
    ],
    "nl2bash-fs3": [
        (3, ("find /workspace -amin -60", "cat /workspace/dir1/long.txt > /dev/null; find /workspace -amin -1")),
        (12, ("find /workspace -atime +1 -type f -exec mv {} / \\;", "ls /")),
        (0, ("find /workspace -daystart -type f -mtime -30", "touch /workspace/new.txt; find /workspace -mmin -1")),
        (33, ("find /workspace -printf \"%T@ %p\\n\" | sort -n | head -1 | cut -d\" \" -f2- | xargs ls -al",)),
        (26, ("find /workspace -name foo | xargs ls -tl", "chmod 711 /workspace; ls -ld /workspace")),
    ],
}


def variant_suites(data_dir: Path, limit: int | None) -> list[Suite]:
    suites = []
    for dataset, episodes in VARIANTS.items():
        tasks = load_tasks(dataset, data_dir)
        cases = tuple(Case(f"{dataset}#{index}~{n}", tasks[index], actions)
                      for n, (index, actions) in enumerate(episodes[:limit]))
        suites.append(Suite(f"var-{dataset}", "bash", "variant", dataset, cases))
    return suites


# The original's Python server answers each rpyc call in about 0.2 s (its ThreadPoolServer, not the
# work), so an MBPP turn takes seconds there. Its episodes share nothing but imported modules (the
# namespace is reset), so its suites are cut into consecutive shards that run side by side.
SHARDS = {"python": 16}


def shards(suite: Suite, n: int) -> list[Suite]:
    """`suite` cut into `n` consecutive parts (each in order), or itself when too small to cut."""
    size = -(-len(suite.cases) // n)
    if n <= 1 or len(suite.cases) < 2 * n:
        return [suite]
    return [Suite(f"{suite.name}.{i // size}", suite.kind, suite.source, suite.dataset, suite.cases[i:i + size])
            for i in range(0, len(suite.cases), size)]


def suites(envs: list[str], sources: list[str], data_dir: Path, limit: int | None) -> list[Suite]:
    return [part for suite in _suites(envs, sources, data_dir, limit)
            for part in shards(suite, SHARDS.get(suite.kind, 1))]


def _suites(envs: list[str], sources: list[str], data_dir: Path, limit: int | None) -> list[Suite]:
    out: list[Suite] = []
    for kind in envs:
        if "gold" in sources:
            out += gold_suites(kind, data_dir, limit)
        if "recording" in sources:
            out += recording_suites(kind, data_dir, limit)
        if "variant" in sources and kind == "bash":
            out += variant_suites(data_dir, limit)
    return out
