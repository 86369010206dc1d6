"""Harbor task folders, read as they are (harborframework.com/docs/tasks):

    hello-world/
      task.toml              timeouts, resources, network; [metadata] is free (tasks/harbor_config.py)
      instruction.md         the task, as the agent reads it
      environment/Dockerfile the agent's container (its build context is environment/)
      tests/test.sh          the verifier: copied to /tests after the agent, writes /logs/verifier/reward.*
      solution/solve.sh      the reference solution (the oracle's)

    tasks = read_harbor(Path("datasets/my-bench"), label="my-bench")   # one folder, or a folder of them

One task, one failure: a folder whose task.toml is malformed, whose instruction is missing, whose
links lead out of it, or that asks for what we can't do here, is that task's line
(`Task.unavailable`; `Task.malformed` when the folder itself is at fault); the other tasks
run. Unknown keys are warnings (`meta["warnings"]`). A task's time limit (its agent's and
verifier's timeouts, and a minute) and whether it offers its agent MCP servers or skills are the
task's fields (`Task.time_limit`, `Task.offers_extras`). The environment that runs them is
environments/harbor.py.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from tasks.harbor_compose import read_compose
from tasks.harbor_config import Malformed, Unsupported, read_config
from tasks.model import Task

KIND = "harbor"
TASK_FILE, INSTRUCTION, OLD_TASK_FILE = "task.toml", "instruction.md", "task.yaml"
MARKERS = (TASK_FILE, INSTRUCTION, OLD_TASK_FILE)  # any of them makes a folder a task (a broken one, maybe)
READ = (TASK_FILE, INSTRUCTION, "environment", "tests", "solution", "steps")  # what a run reads of a task folder


def is_task(path: Path) -> bool:
    return any((path / name).exists() or (path / name).is_symlink() for name in MARKERS)


def task_folders(root: Path) -> list[Path]:
    """The task folders at `root`: itself, or its sub-folders that look like tasks, in name order."""
    if is_task(root):
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and is_task(p))


def read_harbor(path: Path, label: str) -> list[Task]:
    """The Harbor tasks at `path` (a task folder, or a folder of task folders, in name order) as
    the task set `label`. ConfigError only when there is none at all."""
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"harbor: {path} is not a directory of Harbor task folders")
    folders = task_folders(root)
    if not folders:
        raise ConfigError(f"harbor: {root} holds no Harbor task (a folder with {TASK_FILE} and {INSTRUCTION})")
    return [_task(folder, label, index) for index, folder in enumerate(folders)]


def image_of(folder: Path) -> str:
    """The image of a task folder: its name and a hash of where it is."""
    slug = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:40] or "task"
    return f"intercode/harbor-{slug}-{hashlib.sha256(str(folder).encode()).hexdigest()[:6]}"


def _task(folder: Path, label: str, index: int) -> Task:
    meta: dict[str, Any] = {"name": folder.name, "dir": str(folder)}
    query = gold = ""
    why: str | None = None
    malformed = False
    try:
        _check_links(folder)
        meta["digest"] = _digest(folder)
        settings, warnings = _read(folder)
        meta.update(settings, warnings=warnings)
        if settings["steps"]:
            query = settings["steps"][0]["instruction"]
            gold = "\n".join(_text(folder / "steps" / s["name"] / "solution" / "solve.sh", missing="")
                             for s in settings["steps"])
        else:
            query = _text(folder / INSTRUCTION)
            gold = _text(folder / "solution" / "solve.sh", missing="")
    except Malformed as exc:
        why, malformed = f"{folder.name}: {exc}", True
    except Unsupported as exc:
        why = f"{folder.name}: {exc}"
    meta.setdefault("digest", "")
    task = Task(kind=KIND, dataset=label, index=index, query=query, gold=gold, image=image_of(folder), meta=meta,
                name=folder.name, time_limit=time_limit(meta), offers_extras=offers_extras(meta))
    return task if why is None else task.refused(why, malformed=malformed)  # no image: nothing to build


def time_limit(meta: Mapping[str, Any]) -> float:
    """Seconds a task's episode may take: the agent's time, the verifier's (each step's), and a
    minute for the containers and the model's last answer."""
    agent, verifier = float(meta.get("agent_timeout", 600)), float(meta.get("verifier_timeout", 600))
    steps = list(meta.get("steps") or [])
    if not steps:
        return agent + verifier + 60.0
    return sum(float(s["agent_timeout"] or agent) + float(s["verifier_timeout"]) for s in steps) + 60.0


def offers_extras(meta: Mapping[str, Any]) -> bool:
    """Whether a task offers its agent MCP servers or skills (task.toml's [environment])."""
    return bool(meta.get("mcp_servers") or meta.get("skills_dir"))


def _read(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """task.toml's settings and warnings, with the folder's parts checked."""
    if not (folder / TASK_FILE).exists():
        if (folder / OLD_TASK_FILE).exists():
            raise Unsupported(f"a Terminal-Bench 1 task ({OLD_TASK_FILE}): convert it to Harbor's format with "
                              f"`harbor tasks migrate -i {folder} -o NEW_DIR`, then give NEW_DIR")
        raise Malformed(f"{TASK_FILE} is missing")
    settings, warnings = read_config(_text(folder / TASK_FILE))
    if settings["steps"]:
        warnings += _read_steps(folder, settings["steps"])
    elif not (folder / INSTRUCTION).is_file():
        raise Malformed(f"{INSTRUCTION} is missing")
    elif not (folder / "tests" / "test.sh").is_file():
        raise Malformed("tests/test.sh is missing")
    environment = folder / "environment"
    compose = read_compose(environment)
    settings.update(services=[], main_context=None, main_dockerfile=None)
    if compose is not None:
        warnings += compose.warnings
        settings["services"] = [asdict(service) for service in compose.services]
        settings["env"] = {**compose.main_env, **settings["env"]}
        settings["docker_image"] = settings["docker_image"] or compose.main_image
        settings["main_context"], settings["main_dockerfile"] = compose.main_context, compose.main_dockerfile
    settings["verifier_context"] = None
    if settings["verifier_separate"]:  # its image, as Harbor picks it: docker_image, tests/Dockerfile, the task's
        if (folder / "tests" / "docker-compose.yaml").is_file() and not settings["verifier_docker_image"]:
            raise Unsupported("tests/docker-compose.yaml (a separate verifier made of compose services) is not "
                              "supported here: give it a tests/Dockerfile")
        if not settings["verifier_docker_image"] and (folder / "tests" / "Dockerfile").is_file():
            settings["verifier_context"] = str(folder / "tests")
    built = settings["main_context"] is not None or (environment / "Dockerfile").is_file()
    if not built and not settings["docker_image"]:
        raise Malformed("environment/Dockerfile is missing (and task.toml's [environment] gives no docker_image)")
    return settings, warnings


def _read_steps(folder: Path, steps: list[dict[str, Any]]) -> list[str]:
    """Each step's folder (steps/NAME: instruction.md, tests/, solution/, workdir/), its
    instruction read into the step; the step's warnings returned."""
    warnings = []
    for step in steps:
        where = folder / "steps" / step["name"]
        if not (where / INSTRUCTION).is_file():
            raise Malformed(f"steps/{step['name']}/{INSTRUCTION} is missing")
        if not (where / "tests" / "test.sh").is_file() and not (folder / "tests" / "test.sh").is_file():
            raise Malformed(f"steps/{step['name']} has no tests/test.sh, and the task has no shared tests/test.sh")
        step["instruction"] = _text(where / INSTRUCTION)
        warnings += step.pop("warnings")
    return warnings


def _text(path: Path, missing: str | None = None) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if missing is not None:
            return missing
        raise Malformed(f"{path.name} is missing") from None
    except OSError as exc:
        raise Malformed(f"{path.name} can't be read: {exc.strerror or exc}") from None


def _check_links(folder: Path) -> None:
    """Malformed when a link among what a run reads leads out of the folder (a host file would
    become the prompt, the tests or the image), or when links form a cycle."""
    for name in READ:
        _check_tree(folder / name, folder, frozenset())


def _check_tree(path: Path, root: Path, ancestors: frozenset[Path]) -> None:
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(root):
            link = path.relative_to(root)
            raise Malformed(f"{link} is a link to {path.readlink()}, outside the task's folder: put the file itself "
                            "in the folder (links must stay inside it)")
    if not path.is_dir():
        return
    real = path.resolve()
    if real in ancestors:
        raise Malformed(f"{path.relative_to(root)} is a link that loops back into its own folder")
    try:
        children = sorted(path.iterdir())
    except OSError as exc:
        raise Malformed(f"{path.relative_to(root)} can't be read: {exc.strerror or exc}") from None
    for child in children:
        _check_tree(child, root, ancestors | {real})


def _digest(folder: Path) -> str:
    """A hash of every regular file of the task folder: results are refused to a changed task."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            digest.update(str(path.relative_to(folder)).encode() + b"\0->" + str(path.readlink()).encode())
        elif path.is_file():
            try:
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
            except OSError as exc:
                raise Malformed(f"{path.relative_to(folder)} can't be read: {exc.strerror or exc}") from None
    return digest.hexdigest()[:16]
