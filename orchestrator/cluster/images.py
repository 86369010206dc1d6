"""Images on every host (issue 17, item 4): one build, shipped to the hosts that lack it.

Builds are not bit-reproducible, so the sweep process (the head) keeps one build of each image and
ships it as a `docker save` archive, in pieces through the host agents' Ray calls (no shared
filesystem assumed), to every host whose image is neither the head's (same id) nor built from the
same inputs (same `intercode.inputs-hash` label).

- `image_facts(docker, images)`: on a node, each image's id and inputs-hash label (None: missing).
- `ImageLoader.feed(docker, token, chunk, last)`: on a node, spools an archive's pieces to an
  unlinked temp file and loads it into the engine on the last.
- `sync_images(docker, agents, images)`: on the head, checks every host and ships what is needed
  (or, with `ship=False`, refuses the first host that is not right with one line).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import tempfile
import time
import uuid
from collections import OrderedDict
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, BinaryIO

import aiodocker
import ray.exceptions
import structlog

from foundation.engine import engine_deadline
from foundation.errors import ImageError, UserError
from orchestrator.cluster.remote import HostLost
from orchestrator.images.build import HASH_LABEL
from orchestrator.images.engine_build import find_image
from orchestrator.images.specs import BY_NAME

IMAGE_TRANSFER_TIMEOUT = 1800.0  # seconds to save or load an image archive of a few GB
log = structlog.get_logger(__name__)

KEPT_ARCHIVES = 4  # archives a node receives at once; the oldest unfinished one is dropped beyond
SHIP_HOSTS = 4  # hosts the head ships to at once
COPY_BYTES = 1 << 20  # read size of the head's export stream
JOINED = ("manifest.json", "index.json", "repositories")  # the listings a joined archive merges


# ---------------------------------------------------------------- node side


async def image_facts(docker: aiodocker.Docker, images: list[str]) -> dict[str, dict[str, Any] | None]:
    """Each image's `{"id": ..., "inputs_hash": ...}` on this engine (the hash None when it has no
    label); None when the engine has no such image. Raises ImageError when the engine fails."""
    facts: dict[str, dict[str, Any] | None] = {}
    for image in images:
        found = await find_image(docker, image)
        labels = ((found or {}).get("Config") or {}).get("Labels") or {}
        facts[image] = {"id": found["Id"], "inputs_hash": labels.get(HASH_LABEL)} if found else None
    return facts


class ImageLoader:
    """Receives `docker save` archives in pieces, each archive (a token) spooled to an unlinked temp
    file, so nothing is held in memory and a killed agent leaves no file behind. At most
    `kept` archives are received at once: a new one beyond drops the oldest unfinished one."""

    def __init__(self, kept: int = KEPT_ARCHIVES, spool_dir: str | None = None) -> None:
        self.kept = kept
        self.spool_dir = spool_dir
        self.spools: OrderedDict[str, BinaryIO] = OrderedDict()

    async def feed(self, docker: aiodocker.Docker, token: str, chunk: bytes, last: bool) -> list[str] | None:
        """Append `chunk` to archive `token`; on `last`, load the archive into the engine and return
        what it loaded (image names, or ids for untagged images). Raises ImageError."""
        spool = self.spools[token] if token in self.spools else self._open(token)
        try:
            await asyncio.to_thread(spool.write, chunk)
        except OSError as exc:
            self.drop(token)
            raise ImageError(f"could not spool image archive {token} on this node: {exc}") from exc
        if not last:
            return None
        del self.spools[token]
        with spool:
            spool.seek(0)
            return await _load(docker, spool, token)

    def drop(self, token: str) -> None:
        """Forget archive `token` and free its file."""
        spool = self.spools.pop(token, None)
        if spool is not None:
            spool.close()

    def _open(self, token: str) -> BinaryIO:
        while len(self.spools) >= self.kept:
            oldest = next(iter(self.spools))
            log.warning("image_archive_abandoned", token=oldest)
            self.drop(oldest)
        spool = tempfile.TemporaryFile(prefix="intercode-image-", dir=self.spool_dir)
        self.spools[token] = spool
        return spool


async def _load(docker: aiodocker.Docker, archive: BinaryIO, token: str) -> list[str]:
    try:
        async with engine_deadline(f"load image archive {token}", IMAGE_TRANSFER_TIMEOUT):
            lines = await docker.images.import_image(data=archive)
    except aiodocker.DockerError as exc:
        raise ImageError(f"the engine did not load image archive {token}: {exc.message}") from exc
    loaded = [line["stream"].split(":", 1)[1].strip() for line in lines
              if line.get("stream", "").startswith("Loaded image")]
    if not loaded:
        raise ImageError(f"the engine loaded no image from archive {token}: {lines[-1:]}")
    return loaded


# ---------------------------------------------------------------- head side


@dataclass(frozen=True, slots=True)
class Archive:
    """One `docker save` archive on the head, in an unlinked temp file read by offset, so several
    hosts are sent it at once."""

    file: BinaryIO
    size: int
    images: tuple[str, ...]


async def sync_images(docker: aiodocker.Docker, agents: Mapping[str, Any], images: list[str], *,
                      ship: bool = True, chunk_bytes: int = 8 << 20) -> dict[str, dict[str, str]]:
    """Make each host's `images` the head's: the same id, or the same inputs-hash label (the host
    built it from the same inputs). With `ship`, hosts that lack an image or have one built from
    other inputs are sent the head's (one archive per set of images needed, `SHIP_HOSTS` hosts at
    once); without, the first such host is refused with one line. `docker` is the head's engine,
    `agents` maps each host to its agent. Returns {host: {image: id on that host}}.
    Raises ImageError (a host refused, or still not right after shipping) or HostLost."""
    ours = await image_facts(docker, images)
    if lacking := [image for image in images if ours[image] is None]:
        raise ImageError(f"the head's engine has no {lacking[0]}: build it {_how_to_build(lacking[0])}")
    facts = await _all_facts(agents, images)
    problems = {host: {i: line for i in images if (line := _problem(host, i, ours[i], facts[host][i]))}
                for host in agents}
    if lines := [line for found in problems.values() for line in found.values()]:
        needs = {host: tuple(found) for host, found in problems.items() if found}
        if not ship:
            more = f" ({len(lines) - 1} more not right, on {', '.join(needs)})" if len(lines) > 1 else ""
            raise ImageError(lines[0] + more)
        await _ship_all(docker, agents, needs, chunk_bytes)
        facts.update(await _all_facts({host: agents[host] for host in needs}, images))
        _check_shipped(facts, ours, needs)
    else:
        log.info("images_in_sync", hosts=len(agents), images=images)
    return {host: {image: facts[host][image]["id"] for image in images} for host in agents}


def _problem(host: str, image: str, ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str | None:
    """What is wrong with `host`'s `image` (one line), or None when it is right."""
    assert ours is not None
    how = _how_to_build(image)
    if theirs is None:
        return f"host {host} has no {image}: build it there {how} or let the sweep ship it"
    if theirs["id"] == ours["id"] or (ours["inputs_hash"] and theirs["inputs_hash"] == ours["inputs_hash"]):
        return None
    return (f"host {host}: its {image} was built from other inputs (hash {theirs['inputs_hash']} vs "
            f"{ours['inputs_hash']} on the head): rebuild it there {how} or let the sweep ship it")


def _how_to_build(image: str) -> str:
    name = image.removeprefix("intercode/").removesuffix(":latest")
    return f"with `python -m orchestrator images build {name}`" if name in BY_NAME else "(not one of ours)"


async def _all_facts(agents: Mapping[str, Any], images: list[str]) -> dict[str, dict[str, Any]]:
    facts = await _together([_call(host, agent.image_facts, images) for host, agent in agents.items()])
    return dict(zip(agents, facts))


async def _together(calls: list[Coroutine[Any, Any, Any]]) -> list[Any]:
    """The calls' results, run in one TaskGroup; a failure is raised as itself (the first), not as
    a group, so callers see an ImageError or HostLost."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    return [task.result() for task in tasks]


async def _call(host: str, method: Any, *args: Any) -> Any:
    """An agent's method; Ray's errors end here (the agent's own error raised as itself)."""
    try:
        return await method.remote(*args)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, UserError):  # the node's own trouble (no engine, a bad archive): name the node
            raise type(exc.cause)(f"host {host} cannot run episodes: {exc.cause}") from None
        raise exc.cause from None
    except ray.exceptions.RayActorError as exc:
        raise HostLost(f"the host agent of {host} is gone while syncing images: {type(exc).__name__}") from exc


def _check_shipped(facts: dict[str, dict[str, Any]], ours: dict[str, Any], needs: dict[str, tuple[str, ...]]) -> None:
    for host, needed in needs.items():
        for image in needed:
            if (theirs := (facts[host][image] or {}).get("id")) != ours[image]["id"]:
                raise ImageError(f"host {host}: its {image} is still not the head's after shipping "
                                 f"(id {theirs} vs {ours[image]['id']})")


async def _ship_all(docker: aiodocker.Docker, agents: Mapping[str, Any], needs: dict[str, tuple[str, ...]],
                    chunk_bytes: int) -> None:
    """One archive per distinct set of images needed, sent to the hosts that need that set."""
    hosts_by_set: dict[tuple[str, ...], list[str]] = {}
    for host, needed in needs.items():
        hosts_by_set.setdefault(needed, []).append(host)
    shipping = asyncio.Semaphore(SHIP_HOSTS)
    for needed, hosts in hosts_by_set.items():
        with ExitStack() as files:
            archive = await _archive(docker, needed, files)
            await _together([_ship(host, agents[host], archive, chunk_bytes, shipping) for host in hosts])


async def _ship(host: str, agent: Any, archive: Archive, chunk_bytes: int, shipping: asyncio.Semaphore) -> None:
    async with shipping:
        start = time.monotonic()
        token = f"{host}-{uuid.uuid4().hex[:12]}"
        offset, loaded = 0, None
        while offset < archive.size:
            chunk = await asyncio.to_thread(os.pread, archive.file.fileno(), chunk_bytes, offset)
            offset += len(chunk)
            loaded = await _call(host, agent.load_chunk, token, chunk, offset >= archive.size)
        log.info("images_shipped", host=host, images=list(archive.images), loaded=loaded, bytes=archive.size,
                 seconds=round(time.monotonic() - start, 2))


async def _archive(docker: aiodocker.Docker, images: tuple[str, ...], files: ExitStack) -> Archive:
    """The head's `docker save` of `images`, in a temp file closed with `files`. The engine's API
    saves one image per request, so several are saved apart and joined (each layer once)."""
    start = time.monotonic()
    archive = files.enter_context(tempfile.TemporaryFile(prefix="intercode-ship-"))
    if len(images) == 1:
        await _export(docker, images[0], archive)
    else:
        parts = [files.enter_context(tempfile.TemporaryFile(prefix="intercode-ship-")) for _ in images]
        for image, part in zip(images, parts):
            await _export(docker, image, part)
        await asyncio.to_thread(_join, parts, archive)
        for part in parts:
            part.close()  # its disk space, before the archive is sent
    size = archive.seek(0, io.SEEK_END)
    log.info("image_archive_saved", images=list(images), bytes=size, seconds=round(time.monotonic() - start, 2))
    return Archive(archive, size, images)


async def _export(docker: aiodocker.Docker, image: str, into: BinaryIO) -> None:
    try:
        async with engine_deadline(f"save image {image}", IMAGE_TRANSFER_TIMEOUT), \
                docker.images.export_image(image) as stream:
            while chunk := await stream.read(COPY_BYTES):
                await asyncio.to_thread(into.write, chunk)
    except aiodocker.DockerError as exc:
        raise ImageError(f"could not save {image} from the head's engine: {exc.message}") from exc
    await asyncio.to_thread(into.flush)


def _join(parts: Sequence[BinaryIO], into: BinaryIO) -> None:
    """`docker save` archives joined into one: each file once (layers and configs are named by
    their content), the listings (`JOINED`) merged."""
    listings: dict[str, Any] = {}
    written: set[str] = set()
    with tarfile.open(fileobj=into, mode="w|") as out:
        for part in parts:
            part.seek(0)
            with tarfile.open(fileobj=part, mode="r|") as archive:
                for member in archive:
                    if member.name in JOINED:
                        listing = json.load(archive.extractfile(member))  # type: ignore[arg-type]
                        _merge_listing(listings, member.name, listing)
                    elif member.name not in written:
                        written.add(member.name)
                        out.addfile(member, archive.extractfile(member) if member.isfile() else None)
        for name, listing in listings.items():
            data = json.dumps(listing).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    into.flush()


def _merge_listing(listings: dict[str, Any], name: str, listing: Any) -> None:
    if name == "manifest.json":  # a list, one entry per image
        listings.setdefault(name, []).extend(listing)
    elif name == "index.json":  # OCI: {"manifests": [...], ...}
        listings.setdefault(name, {**listing, "manifests": []})["manifests"].extend(listing.get("manifests", []))
    else:  # repositories: {repository: {tag: id}}
        for repository, tags in listing.items():
            listings.setdefault(name, {}).setdefault(repository, {}).update(tags)
