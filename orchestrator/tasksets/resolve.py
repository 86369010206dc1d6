"""Task sets as a sweep file names them (`[[tasks]]`), with what their tasks need to run:

    [[tasks]]  dataset = "nl2bash-fs1"                       # one of the project's datasets
    [[tasks]]  path = "my-env/"                              # an environment of your own (environment.toml)
    [[tasks]]  path = "mine.json", kind = "bash", dockerfile = "fs/Dockerfile"   # your data, our kinds
    [[tasks]]  harbor = "datasets/my-bench"                  # Harbor task folders, as they are

    task_set = resolve(spec, base_dir=sweep_file.parent, data_dir=data_dir)
    task_set.tasks, task_set.hardening, task_set.digest

`resolve` registers what the tasks bring (a kind of your own, the images built from your
Dockerfiles), so every command that runs them (sweep, validate, `tasks check`, the gym adapter)
needs only this. Relative paths are taken from the sweep file's directory. Every mistake is one
ConfigError line that names the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from environments.kind import kind_spec
from environments.own import own_kind
from environments.runtime import pool_configs
from foundation.errors import ConfigError
from foundation.pool import ImagePoolConfig
from foundation.pool.config import DEFAULT_CAP_DROP
from orchestrator.images.specs import ImageSpec, get, own_layer, register
from orchestrator.tasksets.config import TaskSetConfig
from tasks import DATASETS, DatasetInfo, Task, load_tasks, register_dataset
from orchestrator.images.ensure import ensure_images
from tasks.harbor import is_task, read_harbor
from tasks.harbor_config import host_refusal, host_variables
from tasks.harbor_config import resolve as resolve_env
from tasks.own import is_environment, read_environment

__all__ = ["TaskSet", "TaskSetConfig", "of_directory", "prepare", "resolve"]

OWN_BUILD_TIMEOUT = 1800.0  # seconds a Dockerfile of yours may take to build
HARBOR_PIDS = 2048  # processes a Harbor task's container may run (builds, test runners)
# The most a task.toml may ask for, whatever it says (a stranger's task must not take the machine): this
# machine's cores and memory, and a disk cap of 32 GB (Terminal-Bench's tasks ask 10 GB)
MOST_CPUS = float(os.cpu_count() or 1)
MOST_MEMORY_MB = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) >> 20
MOST_STORAGE_MB = 32 << 10
# Harbor's containers keep Docker's defaults: a service its entrypoint starts may listen on port 80.
HARBOR_CAP_DROP = [cap for cap in DEFAULT_CAP_DROP if cap != "NET_BIND_SERVICE"]


@dataclass(frozen=True)
class TaskSet:
    label: str
    tasks: list[Task]
    hardening: dict[str, dict[str, Any]] = field(default_factory=dict)  # image -> Hardening fields its tasks need
    digest: str | None = None  # of your files that define the tasks (None: one of the project's datasets)
    # Each of those files (a Harbor task's folder) -> its digest: a refused resume names the one that changed.
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # warnings to show once before its tasks run

    @property
    def kind(self) -> str:
        """The kind of its tasks (a set has one: your environment's name, `harbor`, or ours)."""
        return self.tasks[0].kind

    @property
    def images(self) -> list[str]:
        """The images its tasks run in (tasks unavailable here have none), their separate verifiers' too."""
        running = [t for t in self.tasks if t.image and t.unavailable is None]
        return sorted({t.image for t in running} | {t.meta["verifier_image"] for t in running if t.meta.get("verifier_image")})

    def pools(self) -> dict[str, ImagePoolConfig]:
        """Each image's pool settings (`Runtime.open(images=...)`)."""
        return pool_configs(self.images, self.hardening)


def resolve(spec: TaskSetConfig, *, base_dir: Path, data_dir: Path | None) -> TaskSet:
    """The task set `spec` names: its tasks (filtered, then sampled or cut), registered with
    what they need. ConfigError for a bad file, or a selection that keeps no task."""
    if spec.dataset is not None:
        found = TaskSet(spec.label, load_tasks(spec.dataset, data_dir))
    elif spec.harbor is not None:
        found = _harbor(spec, _place(base_dir, spec.harbor, "harbor"))
    elif spec.kind is not None:
        found = _our_kind(spec, base_dir)
    else:
        found = _own(spec, _place(base_dir, spec.path or "", "path"))
    return replace(found, tasks=_select(spec, found.tasks))


def of_directory(directory: str | Path, *, allow_internet: bool = False, host_env: list[str] | None = None) -> TaskSet:
    """The tasks of a directory: an environment of your own, or Harbor task folders (one, or a
    folder of them), registered (`tasks check`, the Python API and the gym adapter start here)."""
    root = Path(directory).expanduser().resolve()
    if is_environment(root):
        spec = TaskSetConfig(path=str(root))
    elif root.is_dir() and (is_task(root) or any(is_task(p) for p in root.iterdir() if p.is_dir())):
        spec = TaskSetConfig(harbor=str(root), allow_internet=allow_internet, host_env=host_env or [])
    else:
        raise ConfigError(f"{directory} is neither an environment of your own (no environment.toml) nor Harbor task "
                          "folders (no task.toml with instruction.md)")
    return resolve(spec, base_dir=Path.cwd(), data_dir=None)


async def prepare(directory: str | Path, *, allow_internet: bool = False, host_env: list[str] | None = None) -> TaskSet:
    """`of_directory`, with its images built where missing or out of date: for the Python API.

        task_set = await prepare("my-env/")
        async with Runtime.open(images=task_set.pools()) as runtime:
            async with make_environment(task_set.kind, runtime) as env:
                observation = await env.reset(task_set.tasks[0])
    """
    task_set = await asyncio.to_thread(of_directory, directory, allow_internet=allow_internet, host_env=host_env)
    await ensure_images(task_set.images, None)
    return task_set


def _own(spec: TaskSetConfig, root: Path) -> TaskSet:
    if not root.is_dir() or not is_environment(root):
        raise ConfigError(f"path {root} is no environment of your own (a directory with environment.toml); for a "
                          "task file in NL2Bash's, Spider's or MBPP's format give `kind` too")
    own = read_environment(root)
    own_kind(own)
    if own.manifest.language == "sql":
        register(_sql_image(own.image, root / (own.manifest.dump or "")))
    else:
        source = register(ImageSpec(f"{_short(own.image)}-src", own.manifest.dockerfile, context_dir=own.root,
                                    timeout=OWN_BUILD_TIMEOUT, source=root))
        register(own_layer(_short(own.image), source, image_python=own.manifest.language == "python"))
    return TaskSet(spec.name or own.name, own.tasks(), digest=own.digest(), sources=_digests(own.files))


def _our_kind(spec: TaskSetConfig, base_dir: Path) -> TaskSet:
    """A task file of yours in one of our kinds' formats, registered as a dataset of that kind."""
    path = _place(base_dir, spec.path or "", "path")
    if not path.is_file():
        raise ConfigError(f"path {path} is not a file: with `kind`, `path` is a task file (JSON or JSONL)")
    where = hashlib.sha256(str(path).encode()).hexdigest()[:6]
    slug = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:30] or "tasks"
    inputs = [path]
    kind = kind_spec(spec.kind or "")
    wanted = kind.task_file
    assert wanted is not None  # the sweep file's check: a kind that takes a task file
    if wanted.source == "dump":
        dump = _place(base_dir, spec.dump or "", "dump")
        image = register(_sql_image(f"intercode/sql-data-{slug}-{where}", dump)).tag.removesuffix(":latest")
        inputs.append(dump)
    elif spec.dockerfile is not None:
        dockerfile = _place(base_dir, spec.dockerfile, "dockerfile")
        if not dockerfile.is_file():
            raise ConfigError(f"dockerfile {dockerfile} does not exist")
        source = register(ImageSpec(f"data-{slug}-{where}-src", dockerfile.name, context_dir=dockerfile.parent,
                                    timeout=OWN_BUILD_TIMEOUT, source=path))
        image = register(own_layer(f"data-{slug}-{where}", source, commit_root=wanted.commit_root)).tag
        image = image.removesuffix(":latest")
        inputs.append(dockerfile)
    else:
        image = get(kind.name).tag.removesuffix(":latest")  # the project's image of the kind (MBPP's format: Python's)
    name = spec.name or f"{spec.kind}-{slug}"
    if name in DATASETS and DATASETS[name].path != str(path):
        raise ConfigError(f"task set name {name!r} is taken by another dataset: give this [[tasks]] a `name`")
    register_dataset(DatasetInfo(name, spec.kind or "", image, str(path)))
    return TaskSet(name, load_tasks(name), digest=_digest_files(inputs), sources=_digests(inputs))


def _harbor(spec: TaskSetConfig, root: Path) -> TaskSet:
    label = spec.label
    tasks = []
    hardening: dict[str, dict[str, Any]] = {}
    capped: list[str] = []  # tasks that asked for more than the machine gives
    for task in read_harbor(root, label):
        meta = task.meta
        refusal = None if task.unavailable is not None else _refusal(meta, spec)
        if refusal is not None:  # never built: a task that asks for what this task set does not give it
            task = task.refused(refusal)
        if task.unavailable is not None:
            tasks.append(task)
            continue
        # the variables of this machine its templates may take, by name: their values are read when it runs
        meta = {**meta, "host_env": sorted(set(host_variables(meta)) & set(spec.host_env))}
        folder = Path(meta["dir"])
        context = Path(meta["main_context"]) if meta.get("main_context") else folder / "environment"
        source = register(ImageSpec(f"{_short(task.image)}-src", meta.get("main_dockerfile") or "Dockerfile",
                                    context_dir=context, timeout=meta["build_timeout"], prebuilt=meta["docker_image"],
                                    source=folder))
        services = [_service(task, service, meta["host_env"]) for service in meta.get("services", [])]
        companions = tuple(_short(s["image"]) for s in services)
        if meta.get("verifier_separate"):  # Harbor's separate verifier: a container of its own image, built with the task's
            verifier = _verifier_image(task, folder, source)
            meta = {**meta, "verifier_image": verifier.tag.removesuffix(":latest")}  # named as its task's image is
            companions += (verifier.name,)
        register(own_layer(_short(task.image), source, companions=companions))
        network = bool(meta["allow_internet"] and spec.allow_internet)
        # what its container is given: a verifier that fails offline is told why
        tasks.append(replace(task, meta={**meta, "internet": network}))
        cpus, memory_mb, storage_mb = (min(meta["cpus"], MOST_CPUS), min(meta["memory_mb"], MOST_MEMORY_MB),
                                       min(meta["storage_mb"], MOST_STORAGE_MB))
        if (cpus, memory_mb, storage_mb) != (meta["cpus"], meta["memory_mb"], meta["storage_mb"]):
            capped.append(f"{task.name}'s task.toml asks for {meta['cpus']:g} CPUs, {meta['memory_mb']} MB of memory and "
                          f"{meta['storage_mb']} MB of disk; it gets {cpus:g}, {memory_mb} MB and {storage_mb} MB "
                          "(this machine's most)")
        hardening[task.image] = {"cpus": cpus, "memory_mb": memory_mb, "pids": HARBOR_PIDS,
                                 "disk_mb": max(storage_mb, 64), "network": network,
                                 "cap_drop": HARBOR_CAP_DROP, "entrypoint": True, "services": services}
        if meta.get("verifier_image"):  # the agent's limits and network, without its services
            hardening[meta["verifier_image"]] = {**hardening[task.image], "services": []}
    digest = hashlib.sha256("".join(t.meta["digest"] for t in tasks).encode()).hexdigest()[:16]
    folders = {t.meta["dir"]: t.meta["digest"] for t in tasks}
    return TaskSet(label, tasks, hardening, digest, notes=_harbor_notes(spec, tasks) + capped, sources=folders)


def _verifier_image(task: Task, folder: Path, source: ImageSpec) -> ImageSpec:
    """A separate verifier's image (Harbor's order): [verifier.environment] docker_image, else
    tests/Dockerfile (tests/ its context), else the task's own, each with our layer over it."""
    meta = task.meta
    if meta.get("verifier_docker_image") or meta.get("verifier_context"):
        source = register(ImageSpec(f"{_short(task.image)}-verifier-src", "Dockerfile", context_dir=folder / "tests",
                                    timeout=meta["build_timeout"], prebuilt=meta.get("verifier_docker_image"),
                                    source=folder))
    return register(own_layer(f"{_short(task.image)}-verifier", source))


def _refusal(meta: Mapping[str, Any], spec: TaskSetConfig) -> str | None:
    """Why a Harbor task can't run in this task set, in one line; None when it can: a variable of
    this machine the set does not allow, or an MCP server that is not one of its services while it
    has no internet (this process, not its container, would reach it: this machine's loopback, a
    metadata address)."""
    refusal = host_refusal(meta, spec.host_env)
    if refusal is not None or (meta["allow_internet"] and spec.allow_internet):
        return refusal
    services = {service["name"] for service in meta.get("services") or []}
    outside = [f"{server['name']} at {server['url']}" for server in meta.get("mcp_servers") or []
               if urlsplit(server["url"]).hostname not in services]
    if outside:
        return (f"task.toml's MCP server {outside[0]} is not one of the task's services, and the task has no "
                "internet: an MCP server runs at one of its compose services, or the task asks for the internet "
                "and its [[tasks]] says allow_internet = true")
    return None


def _service(task: Task, service: dict[str, Any], host_env: list[str]) -> dict[str, Any]:
    """A compose service of a Harbor task: its image registered (built from its context, or the
    engine's image it names), and what its pool starts it with."""
    name = f"{_short(task.image)}-svc-{re.sub(r'[^a-z0-9]+', '-', service['name'].lower()).strip('-')[:30]}"
    context = Path(service["context"]) if service["context"] else Path(task.meta["dir"]) / "environment"
    spec = register(ImageSpec(name, service["dockerfile"], context_dir=context, timeout=task.meta["build_timeout"],
                              prebuilt=service["image"], source=Path(task.meta["dir"])))
    return {"name": service["name"], "image": spec.tag.removesuffix(":latest"), "command": service["command"],
            "entrypoint": service["entrypoint"], "environment": resolve_env(service["environment"], host_env),
            "working_dir": service["working_dir"], "user": service["user"], "healthcheck": service["healthcheck"],
            "depends_on": service["depends_on"]}


def _harbor_notes(spec: TaskSetConfig, tasks: list[Task]) -> list[str]:
    """What a user should hear once before Harbor tasks run: each task's warnings (unknown keys),
    and how many ask for the internet that this run does not give."""
    notes = [f"{t.name}: {warning}" for t in tasks for warning in t.meta.get("warnings", [])]
    online = [t for t in tasks if t.unavailable is None and t.meta.get("allow_internet")]
    if online and not spec.allow_internet:
        notes.append(f"{len(online)} of {len(tasks)} tasks ask for the internet (task.toml), which this run does not "
                     "give; their verifiers may fail: allow it with `allow_internet = true` in the [[tasks]] entry "
                     "(`tasks check --allow-internet`)")
    hosts = sorted({h for t in online for h in t.meta.get("allowed_hosts", [])})
    if hosts and spec.allow_internet:
        notes.append(f"an allowlist of hosts ({', '.join(hosts[:3])}{', ...' if len(hosts) > 3 else ''}) can't be "
                     "enforced here: those tasks get the whole network")
    return notes


def _sql_image(image: str, dump: Path) -> ImageSpec:
    """Our MariaDB image with your dump loaded at build (the tasks' `db` names its databases)."""
    if not dump.is_file():
        raise ConfigError(f"dump {dump} does not exist: the .sql file the tasks' databases are loaded from")
    return ImageSpec(_short(image), "sql/Dockerfile", files=("sql/intercode.cnf", "sql/load-data.sh"),
                     data={dump.name if dump.suffix == ".sql" else f"{dump.name}.sql": str(dump)}, source=dump)


def _select(spec: TaskSetConfig, tasks: list[Task]) -> list[Task]:
    """Filtered, then sampled (seeded) or cut to `limit`. ConfigError for indices the set does not
    have, and for a selection that keeps no task."""
    source = spec.dataset or spec.path or spec.harbor
    if spec.indices is not None:
        wanted = set(spec.indices)
        missing = sorted(wanted - {t.index for t in tasks})
        if missing:
            shown = ", ".join(str(i) for i in missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise ConfigError(f"task set {spec.label!r}: {source} has no task {shown} (its indices are "
                              f"0 to {len(tasks) - 1}): fix `indices`")
        tasks = [t for t in tasks if t.index in wanted]
    if spec.filter is not None:
        pattern = re.compile(spec.filter)
        tasks = [t for t in tasks if pattern.search(t.query)]
        if not tasks:
            raise ConfigError(f"task set {spec.label!r}: `filter` {spec.filter!r} matches no task of {source}")
    if spec.sample is not None:
        if spec.sample > len(tasks):
            kept = " after `filter` and `indices`" if spec.filter is not None or spec.indices is not None else ""
            raise ConfigError(f"task set {spec.label!r}: `sample` = {spec.sample} is more than the {len(tasks)} tasks "
                              f"{source} has{kept}: give at most {len(tasks)}, or leave `sample` out for all of them")
        tasks = sorted(random.Random(spec.seed).sample(tasks, spec.sample), key=lambda t: t.index)
    if spec.limit is not None:
        tasks = tasks[: spec.limit]
    if not tasks:
        raise ConfigError(f"task set {spec.label!r}: {source} has no tasks")
    return tasks


def _place(base_dir: Path, value: str, key: str) -> Path:
    path = (base_dir / Path(value).expanduser()).resolve()
    if not path.exists():
        raise ConfigError(f"{key} {path} does not exist (relative paths are taken from the sweep file's directory)")
    return path


def _short(image: str) -> str:
    return image.removeprefix("intercode/")


def _digests(paths: Iterable[Path]) -> dict[str, str]:
    return {str(path): _digest_files([path]) for path in paths}


def _digest_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
