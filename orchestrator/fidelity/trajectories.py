"""Reading trajectory files in the original format, and finding each episode's task.

A file is a JSON object keyed by episode; each value has `environment` (ic_bash, ic_sql,
ic_python, ic_ctf), `dataset` (the original's data path), `task_id`, `query` and `turn_history`
(`actions`, `observations`, `rewards`, and `valid_action`). The task is found by the dataset's
file name and index when the query agrees, else by the query text among all tasks of that kind,
so files of other runs and datasets work too.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError, DataDirError
from tasks import DATASETS, Task, load_tasks

KINDS = {"ic_bash": "bash", "ic_sql": "sql", "ic_python": "python", "ic_ctf": "ctf"}
# The original's data file names, mapped to our dataset names.
FILES = {**{f"nl2bash_fs_{n}.json": f"nl2bash-fs{n}" for n in (1, 2, 3, 4)}, "test_queries.json": "test-queries",
         "dev_spider.json": "spider", "ic_spider_dev.json": "spider", "ic_wikisql_dev.json": "wikisql",
         "ic_bird.json": "bird", "ic_mbpp.json": "mbpp", "ic_apps.json": "apps", "ic_ctf.json": "ctf"}


@dataclass(frozen=True, slots=True)
class Turn:
    action: str
    observation: Any
    reward: float | None


@dataclass(frozen=True, slots=True)
class Episode:
    key: str
    kind: str
    dataset_path: str
    task_id: Any
    query: str
    turns: list[Turn]
    source: str = ""  # the file it was read from: episodes of one file ran in order, in one harness
    harness: str = ""  # "intercode-orchestrator" in files we exported; absent from the original's


def read_episodes(path: Path) -> list[Episode]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"trajectory file {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} is not a trajectory file: expected a JSON object keyed by episode")
    episodes = []
    for key, value in raw.items():
        try:
            history = value["turn_history"]
            kind = KINDS[value["environment"]]
            turns = [Turn(a, o, r) for a, o, r in zip(history["actions"], history["observations"], history["rewards"])]
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: episode {key} is not in the trajectory format (missing {exc})") from None
        episodes.append(Episode(str(key), kind, value.get("dataset", ""), value.get("task_id"), value.get("query", ""),
                                turns, str(path), str(value.get("harness", ""))))
    return episodes


class TaskFinder:
    """Finds the task of an episode; loads each dataset once."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir
        self._loaded: dict[str, list[Task]] = {}

    def tasks(self, dataset: str) -> list[Task]:
        if dataset not in self._loaded:
            try:
                self._loaded[dataset] = load_tasks(dataset, self.data_dir)
            except DataDirError:
                self._loaded[dataset] = []
        return self._loaded[dataset]

    def find(self, episode: Episode) -> Task | None:
        named = FILES.get(Path(episode.dataset_path).name)
        candidates = [named] if named else []
        candidates += [name for name, info in DATASETS.items() if info.env == episode.kind and name not in candidates]
        query = _norm(episode.query)
        if named and isinstance(episode.task_id, int):
            tasks = self.tasks(named)
            if 0 <= episode.task_id < len(tasks) and _norm(tasks[episode.task_id].query) == query:
                return tasks[episode.task_id]
        for name in candidates:
            for task in self.tasks(name):
                if _norm(task.query) == query:
                    return task
        best, best_ratio = None, 0.8
        for name in candidates:
            for task in self.tasks(name):
                ratio = difflib.SequenceMatcher(None, _norm(task.query), query).ratio()
                if ratio > best_ratio:
                    best, best_ratio = task, ratio
        return best


def _norm(text: str) -> str:
    return " ".join(text.split())
