"""The datasets we know, where their files are, and how to read them.

Every loader reads the original format from the data directory (never a copy in the project),
except the starter sets, which the project ships under tasks/starter/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError, DataDirError
from foundation.settings import HOW_TO_FIX
from tasks.model import Task

STARTER_DIR = Path(__file__).resolve().parent / "starter"


Fixup = Callable[[dict[str, Any], Path | None], str | None]  # why a task of its record can't run here


def _no_fixup(record: dict[str, Any], data_dir: Path | None) -> str | None:
    return None


def _ctf_fixup(record: dict[str, Any], data_dir: Path | None) -> str | None:
    """A CTF task is unavailable offline when its set-up downloads, or its files are missing."""
    task_id = record.get("task_id")
    if record.get("setup"):
        return f"its set-up needs the internet: {record['setup']}"
    if data_dir is not None and not (data_dir / "ctf" / "task_assets" / str(task_id)).is_dir():
        return "its files are missing from the data (too large to ship)"
    return None


def _bird_fixup(record: dict[str, Any], data_dir: Path | None) -> str | None:
    return "BIRD's databases are not shipped"


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    name: str
    kind: str  # the environment kind its tasks run in
    image: str
    path: str  # relative to the data dir, or to tasks/starter for starter sets; or absolute
    starter: bool = False
    note: str = ""
    fixup: Fixup = _no_fixup  # why a task of its can't run here, from its record


def _nl2bash(n: int) -> DatasetInfo:
    return DatasetInfo(f"nl2bash-fs{n}", "bash", f"intercode/nl2bash-fs{n}", f"nl2bash/nl2bash_fs_{n}.json")


DATASETS: dict[str, DatasetInfo] = {info.name: info for info in (
    *(_nl2bash(n) for n in (1, 2, 3, 4)),
    DatasetInfo("test-queries", "bash", "intercode/bash", "nl2bash/test_queries.json"),
    DatasetInfo("spider", "sql", "intercode/sql", "sql/spider/ic_spider_dev.json"),
    DatasetInfo("wikisql", "sql", "intercode/sql", "sql/wikisql/ic_wikisql_dev.json"),
    DatasetInfo("bird", "sql", "intercode/sql", "sql/bird/ic_bird.json",
                note="BIRD's databases are not shipped: its tasks load but cannot run", fixup=_bird_fixup),
    DatasetInfo("mbpp", "python", "intercode/python", "python/mbpp/ic_mbpp.json"),
    DatasetInfo("apps", "python", "intercode/python", "python/apps/ic_apps.json",
                note="APPS is not in the shared data; point --data-dir at a copy in the original format"),
    DatasetInfo("ctf", "ctf", "intercode/ctf", "ctf/ic_ctf.json", fixup=_ctf_fixup),
    DatasetInfo("starter-bash", "bash", "intercode/starter", "bash.json", starter=True),
    DatasetInfo("starter-ctf", "ctf", "intercode/starter", "ctf.json", starter=True, fixup=_ctf_fixup),
    DatasetInfo("starter-python", "python", "intercode/python", "python.json", starter=True),
    DatasetInfo("starter-sql", "sql", "intercode/sql-starter", "sql.json", starter=True),
)}


def register_dataset(info: DatasetInfo) -> DatasetInfo:
    """Make a task set known by name (a new kind's, say); its `path` may be absolute."""
    DATASETS[info.name] = info
    return info


def dataset_info(name: str) -> DatasetInfo:
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def load_tasks(name: str, data_dir: Path | None = None) -> list[Task]:
    """All tasks of a dataset, in their original order."""
    info = dataset_info(name)
    if Path(info.path).is_absolute():  # a set registered with its own file
        path = Path(info.path)
    elif info.starter:
        path = STARTER_DIR / info.path
    else:
        if data_dir is None:
            raise DataDirError(f"dataset {name} needs the benchmark data: {HOW_TO_FIX}")
        path = data_dir / info.path
        if not path.is_file():
            extra = f" ({info.note})" if info.note else ""
            raise DataDirError(f"{path} is missing{extra}: {HOW_TO_FIX}")
    records = read_records(path)
    # A starter set's files are in its own image, never in the data dir (which may be set for
    # other sets of the same sweep): its tasks are checked without it.
    assets = None if info.starter else data_dir
    return [_task(info, index, record, assets) for index, record in enumerate(records)]


def read_records(path: Path) -> list[dict[str, Any]]:
    """The task records of a JSON file (an array of objects) or a JSONL file (an object a line).
    ConfigError, naming the file and the record, for anything else, and for a record without a
    `query` (a text)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"task file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read task file {path}: {exc}") from None
    records = _json_lines(path, text) if path.suffix == ".jsonl" else _json_array(path, text)
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise ConfigError(f"{path}: record {number} is not an object: give each task as "
                              '{"query": ..., "gold": ...}')
        if not isinstance(record.get("query"), str) or not record["query"].strip():
            raise ConfigError(f"{path}: record {number} has no `query` (the task's text)")
    return records


def _json_array(path: Path, text: str) -> list[Any]:
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); a JSON array of tasks, or a .jsonl file with "
                          "one task a line") from None
    if not isinstance(records, list):
        raise ConfigError(f"{path} holds a JSON {type(records).__name__}, not an array of tasks")
    return records


def _json_lines(path: Path, text: str) -> list[Any]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path} line {number} is not valid JSON ({exc})") from None
    return records


def _task(info: DatasetInfo, index: int, record: dict[str, Any], data_dir: Path | None) -> Task:
    meta = {k: v for k, v in record.items() if k not in ("query", "gold")}
    task = Task(kind=info.kind, dataset=info.name, index=index, query=record["query"], gold=record.get("gold", ""),
                image=info.image, meta=meta)
    why = info.fixup(record, data_dir)
    return task if why is None else task.refused(why)


