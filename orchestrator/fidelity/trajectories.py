"""Trajectory files: the episode model, reading the `turn_history` every script of the original
wrote, and finding each episode's task.

Which script wrote a file, and the readers of the other shapes, are in `formats.py`;
`read_episodes` reads a file of any of them. An episode of `eval_n_turn.py`, `eval_react.py` or
`eval_ctf.py` (and of `eval_plan_solve.py`, inside its `logs`) has `environment` (ic_bash, ic_sql,
ic_python, ic_ctf), `dataset` (the original's data path), `task_id`, `query` and `turn_history`
(`actions`, `observations`, `rewards`, and `valid_action`). The task is found by the dataset's
file name and index when the query agrees, else by the query text among all tasks of that kind,
so files of other runs and datasets work too.

Everything is checked as it is read, because the files come from elsewhere. A file that is not a
trajectory file is one ConfigError naming it, never a traceback halfway through a replay. A bad
episode stops neither its file nor a table: it is read as far as it is sound and marked `bad` with
one line saying why (`replay` lists it under "bad episodes" and leaves it out of the success
rates). Such are an episode that is not an object or names no known environment (no turns), an
action that is not text or a reward that is not a number (read up to that turn), and `actions`,
`observations` and `rewards` of different lengths (read as far as they agree), which the original
wrote only when its script went wrong: one Plan & Solve episode with an empty plan logged no
action, no observation and a reward of 0. `eval_n_turn.py` logged a policy that raised as an
action `blocked` and a reward 0, without an observation, and ended the episode: that is a turn.
An episode whose lists are all empty has no turns, and is marked too. Tolerated: a reward of null
(the turn is replayed but has nothing to be compared with), any `task_id` (only a whole number is
used, as an index) and any observation (only text is compared).
"""

from __future__ import annotations

import difflib
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
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
class RecordedEpisode:
    """One episode of a recording (the original's trajectories, or a file in one of the formats
    that `formats.py` reads), as replay and the success table take it."""

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
    bad: str = ""  # why the episode is bad as read (read as far as it is sound); "" when it is not


class BadEpisode(Exception):
    """An episode that no script of the original wrote as it is: `turns` are those read soundly
    before the fault, and the message says why (without the file and episode, which the caller names)."""

    def __init__(self, reason: str, turns: list[RecordedTurn] | None = None) -> None:
        super().__init__(reason)
        self.turns = turns or []


def read_episodes(path: Path) -> list[RecordedEpisode]:
    """The episodes of a trajectory file of any of the original's scripts, in the file's order;
    ConfigError (one line) for a file that is not one."""
    from orchestrator.fidelity.formats import (
        read_recording,  # it builds on this module's reading
    )

    return read_recording(path)


def history_episodes(path: Path, raw: dict[str, Any], fmt: str) -> list[RecordedEpisode]:
    """The episodes of a JSON object keyed by episode, each with a `turn_history`, as `fmt` wrote
    them; a bad one is marked, and given the kind of the file's other episodes when it names none."""
    if not raw:
        raise ConfigError(f"{file_label(path)} has no episodes")
    return with_file_kind([history_episode(path, key, value, fmt) for key, value in raw.items()])


def with_file_kind(episodes: list[RecordedEpisode]) -> list[RecordedEpisode]:
    """Bad episodes without a kind of their own take the file's most common one (for the table's row)."""
    kinds = Counter(e.kind for e in episodes if e.kind)
    if not kinds or all(e.kind for e in episodes):
        return episodes
    common = kinds.most_common(1)[0][0]
    return [e if e.kind else replace(e, kind=common) for e in episodes]


def shown(value: object, limit: int = 100) -> str:
    """An episode key (or, with a larger limit, a path) fit for a one-line message: cut short, and
    quoted when it holds what would break the line."""
    text = str(value)
    if text.isprintable() and len(text) <= limit:
        return text
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def key_in_file(episode: RecordedEpisode) -> str:
    """The episode's key in its file (a replay of several files keys them `FILE#KEY`)."""
    key = episode.key
    if episode.source:
        for label in (f"{episode.source}#", f"{Path(episode.source).name}#"):
            key = key.removeprefix(label)
    return key


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


def history_episode(path: Path, key: str, value: object, fmt: str = N_TURN) -> RecordedEpisode:
    """One episode of a file keyed by episode; a bad one is marked with why, and keeps the turns
    read soundly before the fault."""
    try:
        return _history_episode(path, key, value, fmt)
    except BadEpisode as exc:
        fields = value if isinstance(value, dict) else {}
        return RecordedEpisode(key, _kind_or_blank(fields.get("environment")), _text_or_blank(fields.get("dataset")),
                       fields.get("task_id"), _text_or_blank(fields.get("query")), exc.turns, str(path),
                       format=fmt, bad=str(exc))


def _history_episode(path: Path, key: str, value: object, fmt: str) -> RecordedEpisode:
    if not isinstance(value, dict):
        raise BadEpisode(f"not an object but {json_type(value)}")
    kind = kind_named(value.get("environment"))
    history = value.get("turn_history")
    if not isinstance(history, dict):
        raise BadEpisode(f"turn_history is {json_value(history)}; expected an object with {', '.join(COLUMNS)}")
    dataset, query = text_field(value, "dataset"), text_field(value, "query")
    turns = _turns(history, fmt)
    return RecordedEpisode(key, kind, dataset, value.get("task_id"), query, turns, str(path), str(value.get("harness", "")),
                   fmt)


def _kind_or_blank(environment: object) -> str:
    spec = kind_of_export(environment) if isinstance(environment, str) else None
    return spec.name if spec is not None else ""


def _text_or_blank(value: object) -> str:
    return value if isinstance(value, str) else ""


def kind_named(environment: object) -> str:
    """Our kind of the original's environment name ("ic_sql" -> "sql"); BadEpisode if unknown."""
    spec = kind_of_export(environment) if isinstance(environment, str) else None
    if spec is None:
        known = ", ".join(spec.export_name for spec in all_kinds())
        raise BadEpisode(f"environment is {json_value(environment)}; expected one of {known}")
    return spec.name


def text_field(value: dict[str, Any], name: str) -> str:
    text = value.get(name)
    if text is None:
        return ""
    if not isinstance(text, str):
        raise BadEpisode(f"{name} is {json_type(text)}, not text")
    return text


def _turns(history: dict[str, Any], fmt: str) -> list[RecordedTurn]:
    columns: list[list[Any]] = []
    for name in COLUMNS:
        column = history.get(name)
        if not isinstance(column, list):
            raise BadEpisode(f"turn_history.{name} is {json_value(column)}; expected a list, one entry per turn")
        columns.append(column)
    actions, observations, rewards = columns
    if fmt == N_TURN and actions[-1:] == [BLOCKED] and len(actions) == len(rewards) == len(observations) + 1:
        columns[1] = observations + [None]  # the policy raised: logged without an observation
    if fmt == CTF:  # eval_ctf.py stepped the first action of a list, and logged the list
        columns[0] = _firsts(actions)
    turns = _read_turns(columns)
    if len({len(column) for column in columns}) > 1:
        counts = ", ".join(f"{len(column)} {name}" for name, column in zip(COLUMNS, columns))
        raise BadEpisode(f"the lists of turn_history differ in length ({counts}); read as far as they agree: "
                         f"{_count(len(turns), 'turn')}", turns)
    if not turns:
        raise BadEpisode("no turns: the lists of turn_history are all empty")
    return turns


def _firsts(actions: list[Any]) -> list[Any]:
    """The first action of each list the policy returned (an empty one stays, and is not text)."""
    return [action[0] if isinstance(action, list) and action else action for action in actions]


def _read_turns(columns: list[list[Any]]) -> list[RecordedTurn]:
    """The turns of the columns, as far as they agree in length and up to the first unsound one."""
    turns: list[RecordedTurn] = []
    for n, (action, observation, reward) in enumerate(zip(*columns), start=1):
        if not isinstance(action, str):
            raise BadEpisode(f"turn {n}: the action is {json_type(action)}, not text", turns)
        try:
            turns.append(RecordedTurn(action, observation, reward_value(reward)))
        except BadEpisode as exc:
            raise BadEpisode(f"turn {n}: {exc}", turns) from None
    return turns


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def reward_value(reward: object) -> float | None:
    if reward is None:
        return None  # not recorded: the turn is replayed, and has nothing to be compared with
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        try:
            value = float(reward)
        except OverflowError:  # an integer beyond any float
            value = math.inf
        if math.isfinite(value):
            return value
    raise BadEpisode(f"the reward is {json_value(reward)}; expected a number or null")


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
        # Per file (`RecordedEpisode.source`): the task as the recording ran it (its replay context).
        self.contexts: dict[str, Callable[[Task], Task]] = {}

    def tasks(self, dataset: str) -> list[Task]:
        if dataset not in self._loaded:
            try:
                self._loaded[dataset] = load_tasks(dataset, self.data_dir)
            except DataDirError:
                self._loaded[dataset] = []
        return self._loaded[dataset]

    def find(self, episode: RecordedEpisode) -> Task | None:
        """The episode's task, in its file's replay context when one was set."""
        task = self.find_task(episode)
        in_context = self.contexts.get(episode.source)
        return in_context(task) if task is not None and in_context is not None else task

    def find_task(self, episode: RecordedEpisode) -> Task | None:
        """The episode's task, as its dataset has it."""
        named = FILES.get(Path(episode.dataset_path).name)
        if named and DATASETS[named].kind != episode.kind:  # a dataset of another kind: ignored
            named = None
        candidates = [named] if named else []
        candidates += [name for name, info in DATASETS.items() if info.kind == episode.kind and name not in candidates]
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
