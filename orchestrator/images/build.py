"""Build the project's images in dependency order, skipping those whose inputs have not changed.

An image's inputs hash covers its build context (paths, modes, contents), its build args and the ID
of its parent image. It is stored on the image as the label `intercode.inputs-hash`, so a second run
finds every image current and builds nothing, and a rebuilt parent makes all its children stale.
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
from foundation.errors import ImageError
from orchestrator.images.base import ensure_base
from orchestrator.images.build_context import Entry, collect, describe, inputs_hash, write_tar
from orchestrator.images.engine_build import (
    Line,
    Progress,
    find_image,
    no_progress,
    run_build,
)
from orchestrator.images.specs import BASE_IMAGE, ImageSpec, get, in_build_order

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


async def build_images(names: Iterable[str] | None, data_dir: Path, *, force: bool = False,
                       progress: Progress = no_progress,
                       docker: aiodocker.Docker | None = None) -> list[BuildResult]:
    """Build the named images (all when None) and their parents, base image first.

    force rebuilds the named images and their parents without the layer cache (the base image is
    only ever made when missing). Raises ImageError, DataDirError or EngineUnavailable.
    """
    specs = in_build_order(names)
    contexts = {s.name: await asyncio.to_thread(collect, s, data_dir) for s in specs}  # fail early
    results: list[BuildResult] = []
    async with _client(docker) as client:
        ids: dict[str | None, str] = {None: await ensure_base(client, progress)}
        replaced: list[tuple[str, str]] = []  # (name, old image ID) of each image a build replaced
        for spec in specs:
            old = await find_image(client, spec.tag)
            result = await _build_one(client, spec, contexts[spec.name], ids[spec.parent], old, force, progress)
            ids[spec.name] = result.image_id
            results.append(result)
            if old is not None and old["Id"] != result.image_id:
                replaced.append((spec.name, old["Id"]))
        # Children first: an old parent can only go once no old child is built on it.
        for name, old_id in reversed(replaced):
            await _drop_replaced(client, name, old_id, progress)
    return results


async def _build_one(docker: aiodocker.Docker, spec: ImageSpec, entries: list[Entry], parent_id: str,
                     current: dict[str, Any] | None, force: bool, progress: Progress) -> BuildResult:
    """Build one image unless `current` (what the engine has under its tag) is already up to date."""
    start = time.monotonic()
    digest = await asyncio.to_thread(inputs_hash, entries, spec.buildargs, parent_id)
    if current is not None and _labels(current).get(HASH_LABEL) == digest and not force:
        progress(Line(spec.name, f"up to date ({current['Id'][7:19]})"))
        return BuildResult(spec.name, spec.tag, current["Id"], False, time.monotonic() - start)
    progress(Line(spec.name, f"building {spec.tag} ({describe(entries)} of context)"))
    context = await asyncio.to_thread(write_tar, entries)
    try:
        image_id = await run_build(docker, spec.name, context, tag=spec.tag, buildargs=spec.buildargs,
                                   labels={HASH_LABEL: digest, NAME_LABEL: spec.name}, nocache=force,
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
    """Per image (all when None), in build order: present, missing or stale, with its size.

    An image whose parent is not present counts as stale: building would rebuild it.
    """
    wanted = None if names is None else [get(n).name for n in names]
    found: dict[str, ImageStatus] = {}
    async with _client(docker) as client:
        base = await find_image(client, BASE_IMAGE)
        for spec in in_build_order(wanted):
            parent_id = base["Id"] if base is not None else None
            if spec.parent is not None:
                parent = found[spec.parent]
                parent_id = parent.image_id if parent.state is ImageState.PRESENT else None
            found[spec.name] = await _status(client, spec, data_dir, parent_id)
    return [s for s in found.values() if wanted is None or s.name in wanted]


async def _status(docker: aiodocker.Docker, spec: ImageSpec, data_dir: Path, parent_id: str | None) -> ImageStatus:
    current = await find_image(docker, spec.tag)
    if current is None:
        return ImageStatus(spec.name, spec.tag, ImageState.MISSING, None, None)
    state = ImageState.STALE
    if parent_id is not None:
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
