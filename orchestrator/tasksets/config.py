"""A `[[tasks]]` table of the sweep file, as validated: where the tasks come from and which of
them to keep. Resolving it into tasks is `orchestrator/tasksets/resolve.py`'s job; this module stays
light (pydantic and the dataset table; the kinds only for a task file of yours) so that a sweep
file is checked without importing what runs the tasks.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from environments.kind import task_file_kinds
from tasks import DATASETS

MAX_TASKS = 1_000_000  # most tasks a task set may keep (`sample`, `limit`, `indices`)


class TaskSetConfig(BaseModel):
    """Tasks of one source, all of them or a filter, then a seeded sample or the first `limit`."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(None, description="a dataset name, e.g. nl2bash-fs1, spider, mbpp, ctf, starter-bash")
    path: str | None = Field(None, description="an environment directory of your own (with environment.toml), "
                             "or with `kind` a task file of yours (JSON or JSONL)")
    harbor: str | None = Field(None, description="a Harbor task folder, or a folder of them")
    kind: str | None = Field(
        None, description="with `path`: the file is in this kind's format (bash: NL2Bash's, sql: Spider's, python: MBPP's)")
    dockerfile: str | None = Field(None, description="kind bash (required) or python: the Dockerfile of the tasks' "
                                   "image; its directory is the build context")
    dump: str | None = Field(None, description="kind sql: the .sql file the tasks' databases are loaded from")
    allow_internet: bool = Field(False, description="harbor: give the network to tasks whose task.toml allows "
                                 "the internet (off: no task has a network)")
    host_env: list[str] = Field(default_factory=list, max_length=100, description="harbor: the variables of this "
                                "machine that its tasks' `${VAR}` templates may take (none by default: a task that "
                                "asks for another, say a provider's key, is refused)")
    name: str | None = Field(None, description="how results call this set; default: the dataset or the folder's name")
    filter: str | None = Field(None, description="regular expression; keep tasks whose query matches")
    indices: list[int] | None = Field(None, max_length=MAX_TASKS, description="keep only these task indices")
    sample: int | None = Field(None, ge=1, le=MAX_TASKS, description="a seeded random sample of this many tasks "
                               "(no more than the set has)")
    seed: int = Field(0, description="seed of the sample")
    limit: int | None = Field(None, ge=1, le=MAX_TASKS, description="keep the first this many tasks")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, value: str | None) -> str | None:
        if value is not None and value not in DATASETS:
            raise ValueError(f"unknown dataset {value!r}; allowed: {', '.join(DATASETS)} (or give `path` or `harbor`)")
        return value

    @field_validator("host_env")
    @classmethod
    def _variable_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
        if bad:
            raise ValueError(f"not a variable's name: {', '.join(map(repr, bad))} (give names, not values)")
        return value

    @field_validator("filter")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TaskSetConfig:
        sources = [key for key in ("dataset", "path", "harbor") if getattr(self, key) is not None]
        if len(sources) != 1:
            raise ValueError("give exactly one of `dataset`, `path` (your environment or task file) and `harbor` "
                             f"(Harbor task folders){'; got ' + ', '.join(sources) if sources else ''}")
        if self.kind is not None and self.path is None:
            raise ValueError("`kind` goes with `path`, a task file of yours in that kind's format")
        if self.kind is not None or self.dockerfile is not None or self.dump is not None:
            self._check_task_file()
        if self.allow_internet and self.harbor is None:
            raise ValueError("`allow_internet` is for Harbor tasks")
        if self.host_env and self.harbor is None:
            raise ValueError("`host_env` is for Harbor tasks")
        return self

    def _check_task_file(self) -> None:
        """A task file of yours in a kind's format, and what builds its image, as the kind says
        (`KindSpec.task_file`; the kinds are imported only for such a task set)."""
        formats = task_file_kinds()
        if self.kind is not None and self.kind not in formats:
            raise ValueError(f"kind {self.kind!r} takes no task file of yours; kinds that do: {', '.join(formats)}")
        wanted = formats[self.kind] if self.kind is not None else None
        given = {"dockerfile": self.dockerfile, "dump": self.dump}
        if wanted is not None and wanted.required and given[wanted.source] is None:
            raise ValueError(f"a {self.kind} task file needs `{wanted.source}`, {wanted.purpose}")
        for source, value in given.items():
            if value is not None and (wanted is None or wanted.source != source):
                takers = " or ".join(f'"{name}"' for name, fmt in formats.items() if fmt.source == source)
                own = " (an environment of your own names its Dockerfile in environment.toml)" if source == "dockerfile" else ""
                raise ValueError(f"`{source}` goes with kind = {takers}{own}")

    @property
    def label(self) -> str:
        if self.name or self.dataset:
            return self.name or self.dataset or ""
        place = PurePath(self.path or self.harbor or "")
        return (place.stem if self.kind else place.name) or "tasks"
