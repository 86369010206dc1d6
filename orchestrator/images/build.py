"""Build the project's images, skipping those whose inputs have not changed: several at once, each
as soon as the images it needs (its parent, the stages it copies from) are built.

An image's inputs hash covers its build context (paths, modes, contents), its build args and the IDs
of the images it needs. It is stored on the image as the label `intercode.inputs-hash`, so a second
run finds every image current and builds nothing, and a rebuilt parent makes all its children stale.
An image that fails to build costs only itself and the images built on it (`build_each`). A Harbor
task's prebuilt `docker_image` is used when the engine has it, else its Dockerfile is built.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiodocker

from foundation.engine import engine, engine_deadline
from foundation.errors import DataDirError, EngineUnavailable, ImageError
from orchestrator.images.base import ensure_base
from orchestrator.images.build_context import collect, describe, inputs_hash, write_tar
from orchestrator.images.engine_build import (
    Line,
    Progress,
    find_image,
    find_images,
    no_progress,
    run_build,
)
from orchestrator.images.specs import BASE_IMAGE, ImageSpec, get, in_build_order, needs

HASH_LABEL = "intercode.inputs-hash"
NAME_LABEL = "intercode.image"


class ImageState(enum.StrEnum):
    PRESENT = "present"  # built from exactly the current inputs
    MISSING = "missing"
    STALE = "stale"  # built, but its inputs (or a parent) changed since


@dataclass(frozen=True)
class ImageStatus:
    name: str
    tag: str
    state: ImageState
    image_id: str | None
    size: int | None  # bytes, as the engine reports it


@dataclass(frozen=True)
class BuildResult:
    name: str
    tag: str
    image_id: str
    built: bool  # False: it was already current
    seconds: float


PARALLEL_BUILDS = 4  # images built at once (their steps wait on downloads as much as on the CPU)


@dataclass(frozen=True)
class BuildFailure:
    name: str
    tag: str
    error: str  # one line: what failed, and why (the step, apt's `E:` line)


async def build_images(names: Iterable[str] | None, data_dir: Path, *, force: bool = False,
                       progress: Progress = no_progress,
                       docker: aiodocker.Docker | None = None) -> list[BuildResult]:
    """Build the named images (all when None) and what they need, base image first; raises
    ImageError for the first that failed, once the others have been built.

    force rebuilds the named images and their parents without the layer cache (the base image is
    only ever made when missing). Raises ImageError, DataDirError or EngineUnavailable.
    """
    results, failures = await build_each(names, data_dir, force=force, progress=progress, docker=docker)
    if failures:
        raise ImageError(failures[0].error)
    return results


async def build_each(names: Iterable[str] | None, data_dir: Path, *, force: bool = False,
                     progress: Progress = no_progress, docker: aiodocker.Docker | None = None,
                     parallel: int = PARALLEL_BUILDS) -> tuple[list[BuildResult], list[BuildFailure]]:
    """Build the named images (all when None) and what they need, up to `parallel` at once, each
    as soon as what it needs is built. An image that fails to build (and every image built on it)
    is a BuildFailure; the others are built all the same. Raises DataDirError or EngineUnavailable."""
    specs = in_build_order(names)
    async with _client(docker) as client:
        base_id = await ensure_base(client, progress)
        builds = _Builds(client, data_dir, force, progress, asyncio.Semaphore(max(parallel, 1)), base_id)
        try:
            async with asyncio.TaskGroup() as group:
                for spec in specs:
                    builds.tasks[spec.name] = group.create_task(builds.one(spec), name=f"build {spec.name}")
        except ExceptionGroup as failed:  # the engine went away, or the data dir is missing: one error
            raise failed.exceptions[0] from None
        outcomes = [builds.tasks[spec.name].result() for spec in specs]
        # Children first: an old parent can only go once no old child is built on it.
        for name, old_id in reversed(builds.replaced):
            await _drop_replaced(client, name, old_id, progress)
    return ([o for o in outcomes if isinstance(o, BuildResult)], [o for o in outcomes if isinstance(o, BuildFailure)])


class _Builds:
    """One run of builds: each image's task waits for those it needs, then builds under the gate."""

    def __init__(self, docker: aiodocker.Docker, data_dir: Path, force: bool, progress: Progress,
                 gate: asyncio.Semaphore, base_id: str) -> None:
        self.docker, self.data_dir, self.force, self.progress, self.gate = docker, data_dir, force, progress, gate
        self.base_id = base_id
        self.tasks: dict[str, asyncio.Task[BuildResult | BuildFailure]] = {}
        self.replaced: list[tuple[str, str]] = []  # (name, old image ID) of each image a build replaced

    async def one(self, spec: ImageSpec) -> BuildResult | BuildFailure:
        ids = []
        for name in needs(spec):
            outcome = await self.tasks[name]
            if isinstance(outcome, BuildFailure):  # the cause is that image's: its error says it
                return BuildFailure(spec.name, spec.tag, outcome.error)
            ids.append(outcome.image_id)
        parent_id = "|".join(ids if spec.parent is not None else [self.base_id, *ids])
        async with self.gate:
            try:
                old = await find_image(self.docker, spec.tag)
                result = await _build_one(self.docker, spec, self.data_dir, parent_id, old, self.force, self.progress)
            except (DataDirError, EngineUnavailable):
                raise
            except ImageError as exc:
                self.progress(Line(spec.name, f"failed: {exc}"))
                return BuildFailure(spec.name, spec.tag, str(exc))
        if old is not None and old["Id"] != result.image_id:
            self.replaced.append((spec.name, old["Id"]))
        return result


async def _build_one(docker: aiodocker.Docker, spec: ImageSpec, data_dir: Path, parent_id: str,
                     current: dict[str, Any] | None, force: bool, progress: Progress) -> BuildResult:
    """Build one image unless `current` (what the engine has under its tag) is already up to date."""
    start = time.monotonic()
    if spec.prebuilt is not None and (prebuilt := await find_image(docker, spec.prebuilt)) is not None:
        return await _use_prebuilt(docker, spec, prebuilt, current, progress, start)
    if spec.context_dir is not None and not spec.dockerfile_path.is_file():
        raise ImageError(f"{spec.context_dir}: no {spec.dockerfile}, and the engine has no image {spec.prebuilt} "
                         "(task.toml's docker_image; no registry answers here): `docker load` it, or give a Dockerfile")
    entries = await asyncio.to_thread(collect, spec, data_dir)
    digest = await asyncio.to_thread(inputs_hash, entries, spec.buildargs, parent_id)
    if current is not None and _labels(current).get(HASH_LABEL) == digest and not force:
        progress(Line(spec.name, f"up to date ({current['Id'][7:19]})"))
        return BuildResult(spec.name, spec.tag, current["Id"], False, time.monotonic() - start)
    progress(Line(spec.name, f"building {spec.tag} ({describe(entries)} of context)"))
    buildargs = dict(spec.buildargs)
    if spec.parent_user and spec.parent is not None:
        # our layer keeps the image's USER (images/own/Dockerfile): a function of the parent's ID,
        # which the inputs' hash holds already
        parent = await find_image(docker, get(spec.parent).tag)
        buildargs["IC_USER"] = str(((parent or {}).get("Config") or {}).get("User") or "")
    context = await asyncio.to_thread(write_tar, entries)
    try:
        image_id = await run_build(docker, spec.name, context, tag=spec.tag, buildargs=buildargs,
                                   labels={HASH_LABEL: digest, NAME_LABEL: spec.name, **spec.labels}, nocache=force,
                                   progress=progress, dockerfile=spec.dockerfile_in_context, timeout=spec.timeout)
    except ImageError as exc:
        if spec.context_dir is None:
            raise
        raise ImageError(f"{spec.dockerfile_path}: {exc}") from exc  # a Dockerfile of yours: name it
    finally:
        context.close()
    seconds = time.monotonic() - start
    progress(Line(spec.name, f"built {spec.tag} ({image_id[7:19]}) in {seconds:.0f} s"))
    return BuildResult(spec.name, spec.tag, image_id, True, seconds)


async def _use_prebuilt(docker: aiodocker.Docker, spec: ImageSpec, prebuilt: dict[str, Any],
                        current: dict[str, Any] | None, progress: Progress, start: float) -> BuildResult:
    """The prebuilt image the engine has, under the spec's tag: nothing to build, as Harbor uses it."""
    if current is None or current["Id"] != prebuilt["Id"]:
        repository, _, tag = spec.tag.rpartition(":")
        async with engine_deadline(f"tag image {spec.prebuilt}"):
            await docker.images.tag(str(spec.prebuilt), repository, tag=tag)
        progress(Line(spec.name, f"using the prebuilt image {spec.prebuilt} ({prebuilt['Id'][7:19]})"))
    return BuildResult(spec.name, spec.tag, prebuilt["Id"], False, time.monotonic() - start)


async def _drop_replaced(docker: aiodocker.Docker, name: str, image_id: str, progress: Progress) -> None:
    """Delete an image a new build replaced, unless something still uses it (a container or a
    child image): every rebuild would otherwise leave a few hundred MB of untagged layers."""
    try:
        async with engine_deadline(f"remove image {image_id[7:19]}"):
            await docker.images.delete(image_id)
    except aiodocker.DockerError as exc:
        if exc.status not in (404, 409):
            raise
        progress(Line(name, f"kept the replaced image {image_id[7:19]}: {exc.message}", detail=True))


async def image_status(names: Iterable[str] | None, data_dir: Path, *,
                       docker: aiodocker.Docker | None = None) -> list[ImageStatus]:
    """Per image (all when None; by its spec's name or as tasks name it, `intercode/NAME`), in
    build order: present, missing or stale, with its size. ImageError for a name no spec has.

    An image whose parent (or a stage it copies from) is not present counts as stale: building
    would rebuild it.
    """
    wanted = None if names is None else [get(n).name for n in names]
    order = in_build_order(wanted)
    found: dict[str, ImageStatus] = {}
    async with _client(docker) as client:
        held = await find_images(client, [BASE_IMAGE, *(s.tag for s in order)])  # what the engine holds, first
        base = held[BASE_IMAGE]
        for spec in order:
            ids = [found[name].image_id if found[name].state is ImageState.PRESENT else None for name in needs(spec)]
            if spec.parent is None:
                ids.insert(0, base["Id"] if base is not None else None)
            parent_id = None if None in ids else "|".join(str(i) for i in ids)
            found[spec.name] = await _status(client, spec, data_dir, parent_id, held[spec.tag])
    return [s for s in found.values() if wanted is None or s.name in wanted]


async def _status(docker: aiodocker.Docker, spec: ImageSpec, data_dir: Path, parent_id: str | None,
                  current: dict[str, Any] | None) -> ImageStatus:
    """`spec`'s image's state; `current`: the engine's inspect data of its tag (None: not held)."""
    if current is None:
        return ImageStatus(spec.name, spec.tag, ImageState.MISSING, None, None)
    state = ImageState.STALE
    prebuilt = await find_image(docker, spec.prebuilt) if spec.prebuilt is not None else None
    if prebuilt is not None:
        state = ImageState.PRESENT if prebuilt["Id"] == current["Id"] else ImageState.STALE
    elif parent_id is not None and (spec.context_dir is None or spec.dockerfile_path.is_file()):
        entries = await asyncio.to_thread(collect, spec, data_dir)
        digest = await asyncio.to_thread(inputs_hash, entries, spec.buildargs, parent_id)
        if _labels(current).get(HASH_LABEL) == digest:
            state = ImageState.PRESENT
    return ImageStatus(spec.name, spec.tag, state, current["Id"], current.get("Size"))


def _labels(inspect: dict[str, Any]) -> dict[str, str]:
    return (inspect.get("Config") or {}).get("Labels") or {}


@asynccontextmanager
async def _client(docker: aiodocker.Docker | None) -> AsyncIterator[aiodocker.Docker]:
    """The caller's client if given (left open), else our own for the duration."""
    if docker is not None:
        yield docker
        return
    async with engine() as own:
        yield own
