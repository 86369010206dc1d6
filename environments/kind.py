"""What an environment kind is, to the rest of the system: one `KindSpec` per kind, declared in the
kind's own module, registered by name.

    spec = kind_spec("sql")          # imports environments.sql if needed
    spec.language, spec.fence        # "SQL", "sql": what prompts say, what an offline model writes
    spec.gold_actions(task)          # the oracle's actions
    spec.environment                 # SqlEnv, whose `spec` is this one: SqlEnv.spec is spec

A kind's name is looked up once, where there is nothing else to go by (a task's kind: the
environment's class, the oracle, validate, replay, export, the gym adapter); an episode's environment carries
its spec (`env.spec`), which the strategies read. None of them switches on a kind's name. A new
kind is a module that defines an Environment subclass and calls `register(KindSpec(...))`
(tests/unit/test_toy_kind.py does it in a test module alone). What differs between one task of a
kind and another (its turns, its time limit, whether it offers skills) is the task's (tasks/model.py).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from foundation.errors import ConfigError

if TYPE_CHECKING:
    from environments.base import Environment
    from tasks import Task

Parsed = tuple[str, bool]  # (action, is_code), as the paper's parsers return it

# The kinds that ship with the project: name -> the module that registers it (imported on first use).
BUILTIN = {"bash": "environments.bash", "sql": "environments.sql", "python": "environments.python",
           "ctf": "environments.ctf", "harbor": "environments.harbor"}
_KINDS: dict[str, KindSpec] = {}


def _unchanged(action: str) -> str:
    return action


def _run_then_submit(task: Task) -> list[str]:
    return [task.gold_text, "submit"]


def _offers_nothing(task: Task) -> bool:
    return False


def _no_split(reward: float, ours: Mapping[str, object]) -> dict[str, float] | None:
    return None


@dataclass(frozen=True)
class TaskFile:
    """A task file of yours in a kind's format (`[[tasks]] path = FILE, kind = NAME`), and what its
    image is built from: your Dockerfile, or your .sql dump loaded into the project's database image."""

    source: Literal["dockerfile", "dump"]
    required: bool  # the sweep file must give it; else the tasks run on the project's image of the kind
    purpose: str  # what it is for, in the line that asks for it
    commit_root: bool = False  # the image's files are the reward's baseline, committed at build (Bash's)


@dataclass(frozen=True)
class KindSpec:
    name: str
    environment: type[Environment]
    language: str  # what prompts call the code ("BASH", "SQL")
    setting: str  # where it runs, for prompts ("Bourne Shell")
    fence: str  # the tag of the code block an offline model writes
    fence_tags: frozenset[str]  # tags of fenced blocks read as this kind's code (untagged ones too)
    export_name: str  # the original's name of the environment ("ic_bash"): exported files, recordings
    datasets: tuple[str, ...]  # the paper's task sets (validate's default)
    starter: str | None = None  # the starter set the gym adapter defaults to
    gold_actions: Callable[[Task], list[str]] = _run_then_submit  # the oracle's turns
    submit_argument: str = ""  # what `submit` takes, for prompts (" <flag>")
    submit_meaning: str = "the output of your last command is taken as the answer"
    shows_reward: bool = True  # Try Again's feedback shows the reward (the paper's CTF runs did not)
    # The paper's rules for taking the action out of an answer, by name (the strategies hold them:
    # agents/strategies/paper_parsing.py): Single / Try Again / Plan & Solve's, and ReAct's for
    # the code inside execute[...].
    paper_parser: str = "whole"  # bash, sql, python, ctf, code_or_whole, whole
    react_code: str = "as_is"  # as_is, up_to_semicolon
    paper_fenced: bool = False  # an oracle answers the paper's parser in a fence (SQL's keyword rule)
    recorded_action: Callable[[str], str] = _unchanged  # a recorded action as today's harness reads it
    harness_history: bool = False  # the original's harness reused containers across episodes (Bash)
    # A recorded reward split into the reward's parts, the split nearest our breakdown of the same
    # turn (`replay --explain`); None: the kind's recordings keep no parts to infer.
    recorded_parts: Callable[[float, Mapping[str, object]], dict[str, float] | None] = _no_split
    # Whether a task's gold reaches the network, which replays here lack and the recordings had:
    # `replay` replays such an episode but does not score it (left out of both rates).
    reaches_network: Callable[[Task], bool] = _offers_nothing
    # Native function calling (the `tools` strategy): the one tool an agent acts through, its one
    # string argument, and what the model is told it does ("": run the kind's code, get its output).
    tool: str = ""  # "": the fence tag
    tool_argument: str = "code"
    tool_description: str = ""
    # Kinds scored only at `submit` whose episodes must end scored (a verifier runs then: Harbor's
    # tests): when a strategy stops without submitting (turns out, Single's one action), the sweep
    # submits for it.
    submit_at_end: bool = False
    prompts: str = ""  # the prompt templates' suffix (`system_<prompts>.txt`); "": the kind's name
    directory: str | None = None  # an environment of your own: where it is (a cluster's hosts load it from there)
    task_file: TaskFile | None = None  # a task file of yours in this kind's format is welcome (NL2Bash's, Spider's, MBPP's)
    # Derived once, when the spec is made (a spec is immutable): the strategies read them every turn.
    tool_name: str = field(init=False, repr=False, compare=False)
    """The tool an agent acts through: `tool`, else the fence tag."""
    prompt_family: str = field(init=False, repr=False, compare=False)
    """The prompt templates' suffix: `prompts`, else the kind's name."""
    submit_parameter: str = field(init=False, repr=False, compare=False)
    """The name of `submit`'s one parameter as a tool ("flag" for " <flag>"); "" when it takes none."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_name", self.tool or self.fence)
        object.__setattr__(self, "prompt_family", self.prompts or self.name)
        object.__setattr__(self, "submit_parameter", re.sub(r"\W+", "_", self.submit_argument.strip(" <>")).strip("_"))


def register(spec: KindSpec) -> KindSpec:
    """Make `spec` known by its name (again: the latest wins, so a reloaded module stays valid), and
    its environment class's `spec` (what an episode's environment carries: strategies read it).

    An environment class is the class of one kind (its `kind`, which `reset` holds tasks to): a
    spec whose name is not its environment's kind is a ConfigError, so that one class never ends
    with two kinds' specs (a kind of yours on a built-in class subclasses it: environments/own.py).
    """
    if spec.environment.kind != spec.name:
        raise ConfigError(f"kind {spec.name!r} names environment {spec.environment.__name__}, whose kind is "
                          f"{spec.environment.kind!r}: give the kind a class of its own (a subclass) whose "
                          f"`kind` is {spec.name!r}")
    spec.environment.spec = spec
    _KINDS[spec.name] = spec
    return spec


def kind_spec(name: str) -> KindSpec:
    if name not in _KINDS and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    try:
        return _KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown environment kind {name!r}; known: {', '.join(kind_names())}") from None


def task_file_kinds() -> dict[str, TaskFile]:
    """The kinds that take a task file of yours, and what builds its image."""
    return {spec.name: spec.task_file for spec in all_kinds() if spec.task_file is not None}


def kind_names() -> list[str]:
    """The built-in kinds in their usual order, then any registered since."""
    return [*BUILTIN, *(name for name in _KINDS if name not in BUILTIN)]


def all_kinds() -> list[KindSpec]:
    return [kind_spec(name) for name in kind_names()]


def kind_of_export(export_name: str) -> KindSpec | None:
    """The kind the original called `export_name` ("ic_sql"), if any."""
    return next((spec for spec in all_kinds() if spec.export_name == export_name), None)


def gold_actions(task: Task) -> list[str]:
    """The oracle's actions for `task`, one a turn: its kind's rule."""
    return kind_spec(task.kind).gold_actions(task)
