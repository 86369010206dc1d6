"""Trajectory files: the episode model, reading the `turn_history` every script of the original
wrote, and finding each episode's task.

Which script wrote a file, and the readers of the other shapes, are in `formats.py`;
`read_episodes` reads a file of any of them. An episode of `eval_n_turn.py`, `eval_react.py` or
`eval_ctf.py` (and of `eval_plan_solve.py`, inside its `logs`) has `environment` (ic_bash, ic_sql,
ic_python, ic_ctf), `dataset` (the original's data path), `task_id`, `query` and `turn_history`
(`actions`, `observations`, `rewards`, and `valid_action`). The task is found by the dataset's
file name and index when the query agrees, else by the query text among all tasks of that kind,
so files of other runs and datasets work too.

Everything is checked as it is read, because the files come from elsewhere: whatever is not a
trajectory file is one ConfigError that names the file, and the episode and turn where one is at
fault, never a traceback halfway through a replay. Tolerated: a reward of null (the turn is
replayed but has nothing to be compared with), an episode without turns, any `task_id` (only a
whole number is used, as an index) and any observation (only text is compared). Not tolerated:
actions that are not text, rewards that are not numbers, and `actions`, `observations` and
`rewards` of different lengths, which the original never wrote (it appended one of each per turn),
but for one case: `eval_n_turn.py` logged a policy that raised as an action `blocked` and a
reward 0, without an observation, and ended the episode.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments.kind import all_kinds, kind_of_export
from foundation.errors import ConfigError, DataDirError
from tasks import DATASETS, Task, load_tasks

# The original's data file names, mapped to our dataset names.
FILES = {**{f"nl2bash_fs_{n}.json": f"nl2bash-fs{n}" for n in (1, 2, 3, 4)}, "test_queries.json": "test-queries",
         "dev_spider.json": "spider", "ic_spider_dev.json": "spider", "ic_wikisql_dev.json": "wikisql",
         "ic_bird.json": "bird", "ic_mbpp.json": "mbpp", "ic_apps.json": "apps", "ic_ctf.json": "ctf"}
COLUMNS = ("actions", "observations", "rewards")

# The scripts of the original that wrote trajectory files (`formats.py` tells them apart).
N_TURN, REACT, PLAN_SOLVE, CTF, HUMAN = "eval_n_turn", "eval_react", "eval_plan_solve", "eval_ctf", "human"
BLOCKED = "blocked"  # eval_n_turn's action when the policy raised: nothing ran, reward 0, the episode ended


@dataclass(frozen=True, slots=True)
class RecordedTurn:
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
    turns: list[RecordedTurn]
    source: str = ""  # the file it was read from: episodes of one file ran in order, in one harness
    harness: str = ""  # "intercode-orchestrator" in files we exported; absent from the original's
    format: str = N_TURN  # the script that wrote it: its rule parses and scores each turn
    strategy: str = "Try Again"  # the paper's name for the run (Single, Try Again, ReAct, ...)
    plan_steps: int | None = None  # Plan & Solve: the turns after this many are the refine round's


def read_episodes(path: Path) -> list[Episode]:
    """The episodes of a trajectory file of any of the original's scripts, in the file's order;
    ConfigError (one line) for a file that is not one."""
    from orchestrator.fidelity.formats import (
        read_recording,  # it builds on this module's reading
    )

    return read_recording(path)


def history_episodes(path: Path, raw: dict[str, Any], fmt: str) -> list[Episode]:
    """The episodes of a JSON object keyed by episode, each with a `turn_history`, as `fmt` wrote them."""
    if not raw:
        raise ConfigError(f"{file_label(path)} has no episodes")
    return [history_episode(path, key, value, fmt) for key, value in raw.items()]


def shown(value: object, limit: int = 100) -> str:
    """An episode key (or, with a larger limit, a path) fit for a one-line message: cut short, and
    quoted when it holds what would break the line."""
    text = str(value)
    if text.isprintable() and len(text) <= limit:
        return text
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def file_label(path: Path) -> str:
    return shown(path, 400)


def load_json(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"trajectory file {file_label(path)} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{file_label(path)} is a directory: give the trajectory files in it, e.g. "
                          f"{file_label(path / '*.json')}") from None
    except OSError as exc:
        raise ConfigError(f"trajectory file {file_label(path)} cannot be read: {exc.strerror or exc}") from None
    if not data.strip():
        raise ConfigError(f"trajectory file {file_label(path)} is empty")
    return _parse(path, data)


def _parse(path: Path, data: bytes) -> Any:
    # From bytes, json detects UTF-8 (with or without a BOM), UTF-16 and UTF-32 by itself.
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file_label(path)} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                          f"{exc.start}): trajectory files are JSON; convert it, e.g. `iconv -f latin1 -t utf-8`"
                          ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{file_label(path)} is not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError:  # Python refuses integers of more than 4300 digits
        raise ConfigError(f"{file_label(path)} holds a number with too many digits to be a trajectory file") from None
    except RecursionError:
        raise ConfigError(f"{file_label(path)} is nested too deep to be a trajectory file") from None


def history_episode(path: Path, key: str, value: object, fmt: str = N_TURN) -> Episode:
    where = f"{file_label(path)}: episode {shown(key)}"
    if not isinstance(value, dict):
        raise ConfigError(f"{where} is not an object but {json_type(value)}")
    kind = kind_named(where, value.get("environment"))
    history = value.get("turn_history")
    if not isinstance(history, dict):
        raise ConfigError(f"{where}: turn_history is {json_value(history)}; expected an object with "
                          f"{', '.join(COLUMNS)}")
    return Episode(key, kind, text_field(where, value, "dataset"), value.get("task_id"),
                   text_field(where, value, "query"), _turns(where, history, fmt), str(path),
                   str(value.get("harness", "")), fmt)


def kind_named(where: str, environment: object) -> str:
    """Our kind of the original's environment name ("ic_sql" -> "sql"); one ConfigError line if unknown."""
    spec = kind_of_export(environment) if isinstance(environment, str) else None
    if spec is None:
        known = ", ".join(spec.export_name for spec in all_kinds())
        raise ConfigError(f"{where}: environment is {json_value(environment)}; expected one of {known}")
    return spec.name


def text_field(where: str, value: dict[str, Any], name: str) -> str:
    text = value.get(name)
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ConfigError(f"{where}: {name} is {json_type(text)}, not text")
    return text


def _turns(where: str, history: dict[str, Any], fmt: str) -> list[RecordedTurn]:
    columns = [history.get(name) for name in COLUMNS]
    for name, column in zip(COLUMNS, columns):
        if not isinstance(column, list):
            raise ConfigError(f"{where}: turn_history.{name} is {json_value(column)}; expected a list, one entry "
                              "per turn")
    actions, observations, rewards = columns
    if fmt == N_TURN and actions[-1:] == [BLOCKED] and len(actions) == len(rewards) == len(observations) + 1:
        columns[1] = observations + [None]  # the policy raised: logged without an observation
    if fmt == CTF:  # eval_ctf.py stepped the first action of a list, and logged the list
        columns[0] = [_first(f"{where}, turn {n}", a) for n, a in enumerate(actions, start=1)]
    if len({len(column) for column in columns}) > 1:
        counts = ", ".join(f"{len(column)} {name}" for name, column in zip(COLUMNS, columns))
        raise ConfigError(f"{where}: the lists of turn_history differ in length ({counts}); expected one of each "
                          "per turn")
    return [_turn(f"{where}, turn {n}", *entry) for n, entry in enumerate(zip(*columns), start=1)]


def _first(where: str, action: object) -> object:
    if isinstance(action, list):
        if not action:
            raise ConfigError(f"{where}: the action is an empty array")
        return action[0]
    return action


def _turn(where: str, action: object, observation: object, reward: object) -> RecordedTurn:
    if not isinstance(action, str):
        raise ConfigError(f"{where}: the action is {json_type(action)}, not text")
    return RecordedTurn(action, observation, reward_value(where, reward))


def reward_value(where: str, reward: object) -> float | None:
    if reward is None:
        return None  # not recorded: the turn is replayed, and has nothing to be compared with
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        try:
            value = float(reward)
        except OverflowError:  # an integer beyond any float
            value = math.inf
        if math.isfinite(value):
            return value
    raise ConfigError(f"{where}: the reward is {json_value(reward)}; expected a number or null")


def json_type(value: object) -> str:
    """What a JSON value is, in the words of JSON."""
    if value is None:
        return "null"
    names = {bool: "true or false", dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), "a number")


def json_value(value: object) -> str:
    """A short JSON value for a message: `null`, `"0.5"`, `true`, `NaN`, or its type."""
    if value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 20):
        text = json.dumps(value)
        return "missing" if value is None else shown(text)
    return json_type(value)


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
        if named and DATASETS[named].env != episode.kind:  # a dataset of another kind: ignored
            named = None
        candidates = [named] if named else []
        candidates += [name for name, info in DATASETS.items() if info.env == episode.kind and name not in candidates]
        query = _norm(episode.query)
        if named and type(episode.task_id) is int:  # not a bool, nor an id of another kind
            tasks = self.tasks(named)
            if 0 <= episode.task_id < len(tasks) and _norm(tasks[episode.task_id].query) == query:
                return tasks[episode.task_id]
        for name in candidates:
            for task in self.tasks(name):
                if _norm(task.query) == query:
                    return task
        return self._closest(candidates, query)

    def _closest(self, candidates: list[str], query: str) -> Task | None:
        """The task whose query is most like `query`, if more than 80% alike."""
        best, best_ratio = None, 0.8
        matcher = difflib.SequenceMatcher(None, "", query)  # the query is indexed once, for every task
        for name in candidates:
            for task in self.tasks(name):
                matcher.set_seq1(_norm(task.query))
                # The quick upper bounds first: a query of another length (a huge one) costs nothing.
                if matcher.real_quick_ratio() > best_ratio and matcher.quick_ratio() > best_ratio:
                    ratio = matcher.ratio()
                    if ratio > best_ratio:
                        best, best_ratio = task, ratio
        return best


def _norm(text: str) -> str:
    return " ".join(text.split())
