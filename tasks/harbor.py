"""Harbor task folders, read as they are (harborframework.com/docs/tasks):

    hello-world/
      task.toml              timeouts, resources, internet; [metadata] is free
      instruction.md         the task, as the agent reads it
      environment/Dockerfile the agent's container (its build context is environment/)
      tests/test.sh          the verifier: copied to /tests after the agent, writes /logs/verifier/reward.*
      solution/solve.sh      the reference solution (the oracle's)

    tasks = read_harbor(Path("datasets/my-bench"), label="my-bench")   # one folder, or a folder of them

A field we do not support, or a docker-compose environment, makes its task unavailable, with one
line that names the field (`meta["unavailable"]`); the other tasks run. The environment that runs
them is environments/harbor.py.
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from tasks.model import Task

KIND = "harbor"
TASK_FILE, INSTRUCTION = "task.toml", "instruction.md"
AGENT_TIMEOUT, VERIFIER_TIMEOUT = 600.0, 600.0  # Harbor's defaults when task.toml gives none
# What we read of task.toml; any other key of these sections makes the task unavailable.
SUPPORTED = {
    "": {"version", "schema_version", "task", "metadata", "verifier", "agent", "environment", "solution", "source"},
    "verifier": {"timeout_sec", "env", "user"},
    "agent": {"timeout_sec", "user"},
    "environment": {"build_timeout_sec", "cpus", "memory_mb", "storage_mb", "memory", "storage", "allow_internet",
                    "env", "gpus", "docker_image"},
    "solution": {"env"},
}


def is_task(path: Path) -> bool:
    return (path / TASK_FILE).is_file() and (path / INSTRUCTION).is_file()


def read_harbor(path: Path, label: str) -> list[Task]:
    """The Harbor tasks at `path` (a task folder, or a folder of task folders, in name order) as
    the task set `label`. ConfigError when there is none."""
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"harbor: {path} is not a directory of Harbor task folders")
    folders = [root] if is_task(root) else sorted(p for p in root.iterdir() if p.is_dir() and is_task(p))
    if not folders:
        raise ConfigError(f"harbor: {root} holds no Harbor task (a folder with {TASK_FILE} and {INSTRUCTION})")
    return [_task(folder, label, index) for index, folder in enumerate(folders)]


def image_of(folder: Path) -> str:
    """The image of a task folder: its name and a hash of where it is."""
    slug = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:40] or "task"
    return f"intercode/harbor-{slug}-{hashlib.sha256(str(folder).encode()).hexdigest()[:6]}"


def _task(folder: Path, label: str, index: int) -> Task:
    config = _config(folder / TASK_FILE)
    meta: dict[str, Any] = {"name": folder.name, "dir": str(folder), "digest": _digest(folder)}
    try:
        meta.update(_settings(folder, config))
    except _Unsupported as exc:
        meta["unavailable"] = f"{folder.name}: {exc}"
    solution = folder / "solution" / "solve.sh"
    gold = solution.read_text(encoding="utf-8", errors="replace") if solution.is_file() else ""
    query = (folder / INSTRUCTION).read_text(encoding="utf-8", errors="replace")
    image = "" if "unavailable" in meta else image_of(folder)  # nothing to build for a task we can't run
    return Task(env=KIND, dataset=label, index=index, query=query, gold=gold, image=image, meta=meta, name=folder.name)


class _Unsupported(Exception):
    """A task we can't run as Harbor would: the message names the field."""


def _config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    for section in SUPPORTED:
        if section and not isinstance(data.get(section, {}), dict):
            raise ConfigError(f"{path}: [{section}] is not a table")
    return data


def _settings(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """What the harness needs of a task: timeouts, resources, network, environment variables."""
    for section, keys in SUPPORTED.items():
        table = config if not section else config.get(section, {})
        unknown = sorted(set(table) - keys)
        if unknown:
            where = f"[{section}] " if section else ""
            raise _Unsupported(f"task.toml's {where}`{unknown[0]}` is not supported here")
    environment, verifier, agent = config.get("environment", {}), config.get("verifier", {}), config.get("agent", {})
    _check_environment(folder, environment, verifier, agent)
    return {
        "agent_timeout": _seconds(agent.get("timeout_sec"), AGENT_TIMEOUT, "[agent] timeout_sec"),
        "verifier_timeout": _seconds(verifier.get("timeout_sec"), VERIFIER_TIMEOUT, "[verifier] timeout_sec"),
        "verifier_env": _env(verifier.get("env"), "[verifier] env"),
        "solution_env": _env(config.get("solution", {}).get("env"), "[solution] env"),
        "env": _env(environment.get("env"), "[environment] env"),
        "cpus": float(environment.get("cpus", 1)),
        "memory_mb": _size(environment, "memory_mb", "memory", 2048),
        "storage_mb": _size(environment, "storage_mb", "storage", 10240),
        "allow_internet": bool(environment.get("allow_internet", True)),
        "build_timeout": _seconds(environment.get("build_timeout_sec"), 600.0, "[environment] build_timeout_sec"),
    }


def _check_environment(folder: Path, environment: dict[str, Any], verifier: dict[str, Any],
                       agent: dict[str, Any]) -> None:
    env_dir = folder / "environment"
    if any((env_dir / name).exists() for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml")):
        raise _Unsupported("a docker-compose environment (several containers) is not supported here; "
                           "give environment/Dockerfile alone")
    if environment.get("docker_image"):
        raise _Unsupported("[environment] `docker_image` (a prebuilt image from a registry) is not supported here: "
                           "no registry answers; give environment/Dockerfile")
    if not (env_dir / "Dockerfile").is_file():
        raise _Unsupported("environment/Dockerfile is missing")
    if int(environment.get("gpus", 0) or 0) > 0:
        raise _Unsupported("[environment] `gpus` is not supported here (no GPU)")
    for section, table in (("verifier", verifier), ("agent", agent)):
        if table.get("user") not in (None, "root", 0):
            raise _Unsupported(f"[{section}] `user` other than root is not supported here")
    if not (folder / "tests" / "test.sh").exists():
        raise _Unsupported("tests/test.sh is missing")


def _seconds(value: Any, default: float, key: str) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _Unsupported(f"task.toml's {key} must be a positive number of seconds, not {value!r}")
    return float(value)


def _env(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise _Unsupported(f"task.toml's {key} must be a table of texts")
    return {str(k): str(v) for k, v in value.items()}


def _size(environment: dict[str, Any], key: str, old_key: str, default: int) -> int:
    """A size in MB: `memory_mb = 2048`, or the older `memory = "2G"`."""
    if key in environment:
        return int(environment[key])
    text = environment.get(old_key)
    if text is None:
        return default
    found = re.fullmatch(r"\s*([\d.]+)\s*([GMK])B?\s*", str(text).upper())
    if not found:
        raise _Unsupported(f"task.toml's [environment] {old_key} = {text!r}: expected a size such as \"2G\"")
    return int(float(found.group(1)) * {"G": 1024, "M": 1, "K": 1 / 1024}[found.group(2)])


def _digest(folder: Path) -> str:
    """A hash of every file of the task folder: results are refused to a changed task."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
