"""Stored episodes written back out as trajectory files in the original InterCode format.

One JSON file per model × strategy × task set (× epoch when there are several), keyed by episode
number, each with `environment`, `dataset`, `task_id`, `query`, `turn_history` (`actions`,
`observations`, `rewards`, `valid_action`) and `summary`, as the original's runs wrote them, so
`python -m orchestrator replay` and the original's own tools read them. One key more, `harness`,
says the episodes ran in our pristine containers.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from environments.kind import kind_spec
from foundation.errors import ConfigError
from orchestrator.output_files import make_directory, write_files
from orchestrator.store.reader import read_only
from tasks import DATASETS

# Marks our files: `replay` then gives their episodes pristine containers, as they ran, where a
# file of the original's gets the original's long-lived, leakily reset ones.
HARNESS = "intercode-orchestrator"
EXPORT_FIX = "write the export elsewhere with --to DIR"


def export_intercode(outdir: Path, target: Path) -> list[Path]:
    """Write the trajectory files under `target`; returns their paths."""
    with read_only(outdir) as db:
        groups = _episodes(db)
    make_directory(target, "the export directory", EXPORT_FIX)
    epochs = {key[3] for key in groups}
    written = []
    for (model, strategy, task_set, epoch), episodes in sorted(groups.items()):
        name = "__".join(safe_name(part) for part in (model, strategy, task_set))
        path = target / (f"{name}__epoch{epoch}.json" if len(epochs) > 1 else f"{name}.json")
        written += write_files({path: json.dumps({str(i): e for i, e in enumerate(episodes)}, indent=1)}, EXPORT_FIX)
    return written


def _episodes(db: sqlite3.Connection) -> dict[tuple[str, str, str, int], list[dict[str, Any]]]:
    turns: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in db.execute("SELECT episode_id, output, action, observation, reward, executed FROM turns "
                          "ORDER BY episode_id, idx"):
        turns[row[0]].append(row[1:])
    groups: dict[tuple[str, str, str, int], list[dict[str, Any]]] = defaultdict(list)
    rows = db.execute("SELECT id, model, strategy, task_set, epoch, env, dataset, task_index, query, max_turns "
                      "FROM episodes ORDER BY model, strategy, task_set, epoch, dataset, task_index")
    for eid, model, strategy, task_set, epoch, env, dataset, index, query, max_turns in rows:
        groups[(model, strategy, task_set, epoch)].append(_episode(env, dataset, index, query, max_turns, turns[eid]))
    return groups


def _export_name(env: str) -> str:
    """The original's name of the kind; `ic_<kind>` for a kind this process doesn't know (an
    environment of your own, which only the sweep that ran it registered)."""
    try:
        return kind_spec(env).export_name
    except ConfigError:
        return f"ic_{env}"


def _episode(env: str, dataset: str, index: int, query: str, max_turns: int,
             turns: list[tuple[Any, ...]]) -> dict[str, Any]:
    rewards = [float(t[3]) for t in turns]
    best = max(rewards, default=0.0)
    info = DATASETS.get(dataset)
    return {
        "environment": _export_name(env),
        "dataset": f"./data/{info.path}" if info and not info.starter else f"starter/{info.path if info else dataset}",
        "task_id": index,
        "query": query,
        "turn_history": {
            "actions": [t[1] if t[1] is not None else t[0] for t in turns],  # no code: what the model said
            "observations": [t[2] for t in turns],
            "rewards": rewards,
            "valid_action": [bool(t[4]) for t in turns],
        },
        "harness": HARNESS,
        "summary": {"max_reward": best, "max_reward_idx": rewards.index(best) if rewards else -1,
                    "turns_taken": len(turns), "turns_max": max_turns},
    }


def safe_name(text: str) -> str:
    """A model, strategy or task set name as a piece of a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"
