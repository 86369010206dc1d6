"""The replay context of a recording: the world it was made in, inferred from its observations.

Two things, per file of NL2Bash recordings:

- **The container it ran in.** The original's scripts name the image (`intercode-nl2bash`), and
  its Dockerfile set the file system (`file_system_version=1`) whatever `--data_path` said; it was
  changed between some runs and not between others. So a run over file system 2's tasks may have
  run in file system 1, and its golds too. Each file system is weighed by the observations that
  list its paths (for it) and those that report its paths missing (against it). The dataset's
  own wins unless it has more against than for, and at least `MIN_AGAINST`; then the best of the
  others (ties: file system 1, the Dockerfile's default, then by number). File system 4 has no
  paths to report missing: another's listed in `MIN_AGAINST` observations, none missing, moves it.
- **The age of its files.** The dates printed for the set-up's build-time files give the image's
  build: the earliest minute shared by two of them (a reset rewrites a file with a fresh date,
  never an older one, and one file alone may be such). The dates of everything else written
  since (files a reset or an action wrote, `date`) give the moment of recording, whose middle is
  taken. A date without a year is put in the year of the dates that have one, else of the
  set-up's explicit dates.

Only observations are read, never rewards: the rewards are what the replay is judged on, and a
context chosen to fit them would make agreement worthless (`tests/{unit,docker}/test_replay_context.py` changes
every reward of a recording and gets the same context).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from environments.file_ages import META, FileAges
from environments.kind import kind_spec
from orchestrator.fidelity.evidence import LS_FORM, Dated, dates, paths_listed, paths_missing
from orchestrator.fidelity.file_systems import FileSystem, load_file_systems
from orchestrator.fidelity.trajectories import RecordedEpisode, TaskFinder
from tasks import DATASETS, Task

MIN_AGAINST = 3  # observations against the dataset's file system before another is chosen
LATEST = timedelta(days=365)  # dates further after the build are an agent's `touch -t`, not the clock
DATASET, INFERRED = "dataset", "inferred"
# The base's own files: the system's logs, written when the OS and its packages were installed. The
# original's images installed them in a layer all four file systems share, built (and cached) before
# any file system's set-up, from an Ubuntu base older still. Every fs1 recording that asks their age
# saw them older than a day (`find /var/log -mtime +1` lists the apt logs in GPT-4's and
# text-davinci-003's, days and weeks apart); ours are as old as the machine's cached layer (hours,
# or nothing in a fresh build). They are dated BASE_AGE before the replay, or a day before its build
# if that is older. Read from observations, never rewards, as the rest of the context.
BASE = ("/var/log",)
BASE_AGE = timedelta(days=30)


@dataclass(frozen=True)
class Clock:
    """When the recording's image was built, and (the middle of) when the recording was made."""

    built: datetime
    recorded: datetime
    observations: int  # dated observations that gave them

    @property
    def age(self) -> timedelta:
        return max(self.recorded - self.built, timedelta(0))


@dataclass(frozen=True)
class ReplayContext:
    """Where one file's episodes replay: the file system image, and the file ages."""

    source: str
    dataset: str  # the tasks' own file system ("nl2bash-fs2")
    ran_in: str  # the one the recording ran in
    container_evidence: str
    clock: Clock | None
    clock_evidence: str
    roots: tuple[str, ...] = ()  # the top-level paths of the file system it ran in: what ages
    anchor_ns: int = 0  # the replay's moment the ages hold at: one per run, shared by gold and agent

    def describe(self) -> str:
        days = self.base_age.days
        return (f"{Path(self.source).name}: {self.container_evidence}; {self.clock_evidence}; the system's logs "
                f"({', '.join(BASE)}) {days} days old")

    @property
    def base_age(self) -> timedelta:
        """How old the base's own files are made: BASE_AGE, or a day more than the build if older."""
        return max(BASE_AGE, self.clock.age + timedelta(days=1)) if self.clock else BASE_AGE

    def apply(self, task: Task) -> Task:
        """The task as it ran in the recording: in the context's image, its files aged."""
        if task.dataset != self.dataset:
            return task
        meta: dict[str, Any] = dict(task.meta)
        base_ns = _ns(self.base_age)
        if self.clock is not None:
            shift = self.anchor_ns - round(self.clock.recorded.timestamp() * 10**9)  # the recording's clock to ours
            ages = FileAges(self.roots, self.anchor_ns, _ns(self.clock.age), shift, BASE, base_ns)
        else:  # the file system's files keep our image's ages; the base's are as old as there
            ages = FileAges((), self.anchor_ns, 0, 0, BASE, base_ns)
        meta[META] = ages.as_meta()
        return replace(task, image=DATASETS[self.ran_in].image, meta=meta)


def _ns(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def infer_contexts(episodes: list[RecordedEpisode], finder: TaskFinder, data_dir: Path) -> dict[str, ReplayContext]:
    """The context of every file of NL2Bash episodes, by file (`RecordedEpisode.source`)."""
    systems = load_file_systems(data_dir)
    by_file: dict[str, list[RecordedEpisode]] = defaultdict(list)
    for episode in episodes:
        if kind_spec(episode.kind).harness_history:  # the original's long-lived containers (Bash's)
            by_file[episode.source].append(episode)
    anchor = time.time_ns()
    contexts = {}
    for source, file_episodes in by_file.items():
        dataset = _dataset(finder, file_episodes)
        if dataset is not None:
            observations = [str(t.observation) for e in file_episodes for t in e.turns if t.observation is not None]
            contexts[source] = replace(infer_context(source, dataset, observations, systems), anchor_ns=anchor)
    return contexts


def _dataset(finder: TaskFinder, episodes: list[RecordedEpisode]) -> str | None:
    """The NL2Bash dataset most of the file's tasks come from; None when none does."""
    found = Counter(task.dataset for e in episodes if (task := finder.find_task(e)) is not None)
    named = [name for name, _ in found.most_common() if name.startswith("nl2bash-fs")]
    return named[0] if named else None


def infer_context(source: str, dataset: str, observations: list[str], systems: dict[int, FileSystem]) -> ReplayContext:
    """The context of one file from its observations alone (see the module)."""
    ran_in, container_evidence = which_file_system(dataset, observations, systems)
    system = systems[int(ran_in.removeprefix("nl2bash-fs"))]
    clock, clock_evidence = recording_clock(observations, system)
    return ReplayContext(source, dataset, ran_in, container_evidence, clock, clock_evidence, system.roots)


def which_file_system(dataset: str, observations: list[str], systems: dict[int, FileSystem]) -> tuple[str, str]:
    """The file system whose paths agree with the observations, and why (one phrase)."""
    own = int(dataset.removeprefix("nl2bash-fs"))
    votes = {n: _votes(observations, system) for n, system in systems.items()}
    against, found = votes[own]
    best = min((n for n in systems if n != own), key=lambda n: (votes[n][0] - votes[n][1], n != 1, n))
    if against >= MIN_AGAINST and against > found:
        name = systems[best].dataset
        listed = f", {votes[best][1]} list paths of fs{best}" if votes[best][1] else ""
        missing = f"{against} of {len(observations)} observations name paths missing from fs{own}"
        return name, f"ran in {name}: {missing}{listed}"
    if not systems[own].paths and votes[best][1] >= MIN_AGAINST and not votes[best][0]:
        # A file system of no paths of its own (4) has nothing to report missing: another's listed is the evidence.
        name = systems[best].dataset
        return name, f"ran in {name}: {votes[best][1]} of {len(observations)} observations list paths of fs{best}"
    detail = f"{found} of {len(observations)} observations list its paths, {against} report them missing"
    return dataset, f"ran in {dataset}, its own: {detail}"


def _votes(observations: list[str], system: FileSystem) -> tuple[int, int]:
    """(observations reporting its paths missing, observations listing its paths)."""
    against = sum(bool(paths_missing(o) & system.paths) for o in observations)
    found = sum(bool(paths_listed(o) & system.paths) for o in observations)
    return against, found


def recording_clock(observations: list[str], system: FileSystem) -> tuple[Clock | None, str]:
    """When the image was built and the recording made, from the dates the observations print."""
    year = _default_year(observations, system)
    seen = [(i, d) for i, o in enumerate(observations) for d in dates(o, year)]
    build = [(i, d) for i, d in seen if d.name in system.build_names]
    built = _build_time([d for _, d in build])
    if built is None:
        return None, "file ages unknown (no two build-time files dated alike): as our image has them"
    later = [(i, d) for i, d in seen if d.name not in system.explicit_names and built < d.when <= built + LATEST]
    if not later:
        return None, f"file ages unknown (built {built:%Y-%m-%d %H:%M}, nothing dated after it): as our image has them"
    recorded = datetime.fromtimestamp(statistics.median(d.when.timestamp() for _, d in later), built.tzinfo)
    clock = Clock(built, recorded, len({i for i, _ in build + later}))
    days = clock.age.total_seconds() / 86400
    minutes = round(clock.age.total_seconds() / 60)
    age = f"{days:.1f} days" if days >= 1 else f"{minutes} minute{'' if minutes == 1 else 's'}"
    return clock, (f"recorded {age} after its image's build (built {built:%Y-%m-%d %H:%M}, recorded around "
                   f"{recorded:%Y-%m-%d %H:%M}): {clock.observations} dated observations")


def _build_time(build: list[Dated]) -> datetime | None:
    """The earliest minute printed for two different build-time files. One file alone proves
    nothing: a reset may have rewritten it (fs2 #37 of the GPT-4 run lists the latest one)."""
    names: dict[datetime, set[str]] = defaultdict(set)
    for d in build:
        names[d.when.replace(second=0)].add(d.name)
    shared = [when for when, named in names.items() if len(named) >= 2]
    return min(shared) if shared else None


def _default_year(observations: list[str], system: FileSystem) -> int:
    """The year of dates printed without one (`ls -l` of a file less than six months old): that of
    the latest clock or ISO date printed; else the latest of the set-up's explicit years and of
    `ls -l`'s dates with a year (older files); else this year."""
    printed = [d for o in observations for d in dates(o, 1) if d.year]
    full = [d.when.year for d in printed if d.form != LS_FORM]
    if full:
        return max(full)
    older = [d.when.year for d in printed] + list(system.explicit_years)
    return max(older) if older else datetime.now().year
