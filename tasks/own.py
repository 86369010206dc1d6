"""Your own environment, from a directory of three parts and a manifest (InterCode's "Dockerfile +
dataset + reward function"):

    my-env/
      environment.toml   name, action language (shell, python or sql), turn and time limits
      Dockerfile         the task setting (FROM any image the engine has); never mentions our driver
      tasks.jsonl        one task a line: {"query": ..., "gold": ..., any other fields}
      reward.py          def reward(sandbox, task, answer): a number in [0, 1], or (number, {breakdown})

    own = read_environment(Path("my-env"))       # the manifest checked; ConfigError names the file
    tasks = own.tasks()                            # Task(kind=own.name, image=own.image, ...)

This module reads files only; the environment that runs such tasks is environments/own.py, and
the image (the user's Dockerfile, then our layer with the driver) is built by orchestrator/images.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from foundation.validation import invalid_line
from foundation.errors import ConfigError
from tasks.model import Task
from tasks.registry import read_records

MANIFEST = "environment.toml"
DEFAULT_DATASETS = ("tasks.jsonl", "tasks.json")
RESERVED = frozenset({"bash", "sql", "python", "ctf", "harbor", "toy"})  # the project's own kinds
Language = Literal["shell", "python", "sql"]


class Manifest(BaseModel):
    """environment.toml: what the environment is called and how its episodes run."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the environment's name: its kind in results, its image, its task ids")
    description: str = Field("", description="where the agent works, for prompts (\"Debian machine with jq\")")
    language: Language = Field("shell", description="the agent's actions: shell commands, python code or sql queries")
    dataset: str | None = Field(None, description="the task file, JSON or JSONL (default tasks.jsonl or tasks.json)")
    reward: str = Field("reward.py", description="the reward function: FILE.py (its `reward`) or FILE.py:FUNCTION")
    dockerfile: str = Field("Dockerfile", description="the Dockerfile, relative to the directory (shell, python)")
    dump: str | None = Field(None, description="sql: the .sql file loaded into the database at build")
    workdir: str | None = Field(None, description="where actions start (default: the image's WORKDIR)")
    max_turns: int | None = Field(None, ge=1, le=100, description="turns of an episode (default: the sweep's)")
    action_timeout: float = Field(10.0, gt=0, le=3600, description="seconds one action may run")
    episode_timeout: float | None = Field(None, gt=0, le=86_400, description="seconds an episode may take "
                                          "(default: the sweep's)")
    score_every_action: bool = Field(True, description="score the state after every action (the paper's Try "
                                     "Again), or only at `submit` and when the turns run out")

    @field_validator("name")
    @classmethod
    def _a_kind_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", value):
            raise ValueError("use lower-case letters, digits, - and _ (at most 40, starting with a letter)")
        if value in RESERVED:
            raise ValueError(f"{value!r} is one of the project's own kinds; choose another name")
        return value


@dataclass(frozen=True)
class OwnEnvironment:
    """A read environment directory: its manifest and the absolute paths of its parts."""

    root: Path
    manifest: Manifest
    dataset: Path
    reward_file: Path
    reward_function: str

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def image(self) -> str:
        """Its image's name: the name, and a hash of where the directory is (two of the same name
        elsewhere never share one)."""
        prefix = "sql-own" if self.manifest.language == "sql" else "own"
        return f"intercode/{prefix}-{self.name}-{_place(self.root)}"

    @property
    def setting(self) -> str:
        return self.manifest.description or f"{self.name} environment"

    def tasks(self) -> list[Task]:
        """Its tasks, in the dataset's order; each record's fields besides query and gold are its meta."""
        tasks = []
        for index, record in enumerate(read_records(self.dataset)):
            meta = {k: v for k, v in record.items() if k not in ("query", "gold")}
            if self.manifest.language == "sql" and not isinstance(meta.get("db"), str):
                raise ConfigError(f"{self.dataset}: record {index + 1} names no `db` (the database its queries run in)")
            tasks.append(Task(kind=self.name, dataset=self.name, index=index, query=record["query"],
                              gold=_gold(self.dataset, index, record.get("gold", "")), image=self.image, meta=meta,
                              max_turns=self.manifest.max_turns, time_limit=self.manifest.episode_timeout))
        return tasks

    @property
    def files(self) -> tuple[Path, ...]:
        """The files that define its tasks and their scoring: manifest, dataset, reward."""
        return (self.root / MANIFEST, self.dataset, self.reward_file)

    def digest(self) -> str:
        """A hash of what defines its tasks and their scoring (its `files`): a directory of results
        is refused to a changed environment."""
        digest = hashlib.sha256()
        for path in self.files:
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


def is_environment(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def read_environment(path: Path) -> OwnEnvironment:
    """The environment in directory `path`; ConfigError naming the file for any mistake."""
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{path} is not a directory: point `path` at a directory holding {MANIFEST}")
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise ConfigError(f"{root} has no {MANIFEST}: write one (name, language, ...); see the README's "
                          "\"Your own tasks\"")
    manifest = _manifest(manifest_path)
    dataset = _dataset(root, manifest)
    file, _, function = manifest.reward.partition(":")
    reward_file = root / file
    if not reward_file.is_file():
        raise ConfigError(f"{manifest_path}: the reward file {reward_file} does not exist")
    if manifest.language == "sql":
        if manifest.dump is None or not (root / manifest.dump).is_file():
            raise ConfigError(f"{manifest_path}: a sql environment needs `dump`, the .sql file its database is "
                              "loaded from" + (f" ({root / manifest.dump} does not exist)" if manifest.dump else ""))
    elif not (root / manifest.dockerfile).is_file():
        raise ConfigError(f"{root} has no {manifest.dockerfile}: the environment's image is built from it")
    return OwnEnvironment(root, manifest, dataset, reward_file, function or "reward")


def _manifest(path: Path) -> Manifest:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {invalid_line(exc, Manifest)}") from None


def _dataset(root: Path, manifest: Manifest) -> Path:
    if manifest.dataset is not None:
        path = root / manifest.dataset
        if not path.is_file():
            raise ConfigError(f"{root / MANIFEST}: the dataset {path} does not exist")
        return path
    for name in DEFAULT_DATASETS:
        if (root / name).is_file():
            return root / name
    raise ConfigError(f"{root} has no tasks.jsonl or tasks.json: add one, or name the file as `dataset` in {MANIFEST}")


def _gold(path: Path, index: int, gold: object) -> str | list[str]:
    """A record's gold: one action (a command or a script) or a list of them, one a turn."""
    if isinstance(gold, str) or (isinstance(gold, list) and all(isinstance(g, str) for g in gold)):
        return gold
    raise ConfigError(f"{path}: record {index + 1}'s `gold` is neither a text nor a list of texts")


def _place(root: Path) -> str:
    return hashlib.sha256(str(root).encode()).hexdigest()[:6]
