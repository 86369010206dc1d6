"""The task value object shared by loaders, environments, agents and the store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a dataset.

    `index` is the task's position in its original file (what the original's trajectory files
    key by). `gold` is the reference solution: a command, a query, a function or a flag.
    `meta` holds what a kind needs besides: the database (`db`), MBPP's `tests` and
    `test_setup_code`, a CTF task's `tags` or `setup`, Spider's `hardness`. A task that can't run
    here says why in `unavailable` (`refused`): its episodes are stored as task errors, not run.
    `max_turns`, `time_limit` and `offers_extras` are set by the loader that makes the task
    (tasks/harbor.py, tasks/own.py); the fingerprint leaves them out: they change no gold result.
    """

    kind: str  # the environment kind: "bash" | "sql" | "python" | "ctf" | "harbor" | one of yours
    dataset: str  # e.g. "nl2bash-fs1", "spider", "mbpp", "ctf", "starter-bash"
    index: int
    query: str
    gold: str | list[str]
    image: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""  # a name that identifies it in its set (a Harbor task's folder); "": its index
    unavailable: str | None = None  # why it can't run here (then it has no image: nothing is built or leased)
    malformed: bool = False  # unavailable because the task itself is at fault (a Harbor folder's task.toml)
    # What a task sets for itself, read where its episode runs (the sweep's runner, the strategies):
    max_turns: int | None = None
    """Turns its episode may take (your environment's manifest); None: the sweep's max_turns."""
    time_limit: float | None = None
    """Seconds the whole episode may take (a Harbor task's timeouts, your environment's manifest);
    None: the sweep's episode_timeout."""
    offers_extras: bool = False
    """The task offers its agent skills or MCP servers (Harbor's task.toml): its environment knows
    them once reset, so a strategy's first answer waits for the reset."""
    # Derived once, when the task is made (a task is immutable): every layer reads them, per turn.
    id: str = field(init=False, repr=False, compare=False)
    """`<dataset>/<index>`, or `<dataset>/<name>` for a task with a name of its own (its key in the
    store: adding a Harbor folder does not shift the others)."""
    fingerprint: str = field(init=False, repr=False, compare=False)
    """The id plus a hash of everything that defines the task: cached gold results are keyed by it,
    so a task whose gold, query or set-up changed under the same id is computed afresh."""
    gold_text: str = field(init=False, repr=False, compare=False)
    """The gold as one action: a list of commands is joined with `;`, as the original did."""

    def __post_init__(self) -> None:
        task_id = f"{self.dataset}/{self.name or self.index}"
        content = json.dumps([self.query, self.gold, dict(self.meta)], sort_keys=True, default=str)
        object.__setattr__(self, "id", task_id)
        object.__setattr__(self, "fingerprint", f"{task_id}#{hashlib.sha256(content.encode()).hexdigest()[:12]}")
        object.__setattr__(self, "gold_text", self.gold if isinstance(self.gold, str) else ";".join(self.gold))

    def refused(self, why: str, *, malformed: bool = False) -> Task:
        """This task, unavailable here for `why`: no image, so nothing is built or leased for it."""
        return replace(self, unavailable=why, malformed=malformed or self.malformed, image="")
