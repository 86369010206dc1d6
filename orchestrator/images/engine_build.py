"""The engine side of images: look one up, build one with its output streamed as progress lines.

The engine reports a failing step in-band (an `error`/`errorDetail` item, which aiodocker raises as
DockerStreamError); we turn it into one ImageError line naming the image and the step, after
passing the last lines of the step's output to the progress callback so the cause is visible.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any, NamedTuple

import aiodocker
import aiohttp

from foundation.engine import engine_deadline
from foundation.errors import EngineUnavailable, ImageError

TAIL_LINES = 15  # output lines shown when a step fails
BUILD_TIMEOUT = 3600.0  # seconds a build may take unless its spec says (the SQL image's load takes minutes)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the engine colours a step's stderr
ERR_ON, ERR_OFF = "\x1b[91m", "\x1b[0m"  # how: the start and end of what the step wrote to stderr
ENGINE_COLOUR = re.compile("(\x1b\\[91m|\x1b\\[0m)")
APT_ERROR = re.compile(r"(?<![\w])E: ")
BOOKKEEPING = re.compile(r"^ ---> |^Removing intermediate container |^Successfully (built|tagged) ")


class Line(NamedTuple):
    image: str
    text: str
    detail: bool = False  # raw tool output (apt, debootstrap): shown only when verbose


Progress = Callable[[Line], None]


def no_progress(line: Line) -> None:
    """The default callback: stay silent."""


async def find_image(docker: aiodocker.Docker, ref: str) -> dict[str, Any] | None:
    """The engine's inspect data for an image, or None when it has no such image."""
    try:
        async with engine_deadline(f"inspect image {ref}"):
            return await docker.images.inspect(ref)
    except aiodocker.DockerError as exc:
        if exc.status == 404:
            return None
        raise ImageError(f"could not inspect image {ref}: {exc.message}") from exc


async def find_images(docker: aiodocker.Docker, refs: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """`find_image` of each of `refs` (each once, one after another), by ref."""
    return {ref: await find_image(docker, ref) for ref in dict.fromkeys(refs)}


async def run_build(docker: aiodocker.Docker, image: str, context: IO[bytes], *, tag: str,
                    labels: Mapping[str, str], buildargs: Mapping[str, str] | None = None,
                    nocache: bool = False, progress: Progress = no_progress, dockerfile: str = "Dockerfile",
                    timeout: float | None = None) -> str:
    """Build `context` (an uncompressed tar) as `tag`; returns the new image ID. `timeout`: seconds
    the build may take (ImageError past it; by default an hour, which no build of ours nears)."""
    watcher = _Watcher(image, progress)
    timeout = timeout or BUILD_TIMEOUT
    try:
        async with asyncio.timeout(timeout):
            stream = docker.images.build(fileobj=context, encoding="identity", tag=tag, labels=dict(labels),
                                         buildargs=dict(buildargs or {}), nocache=nocache, rm=True,
                                         forcerm=True, stream=True, path_dockerfile=dockerfile)
            async for item in stream:
                watcher.feed(item)
    except TimeoutError:
        raise ImageError(f"building {image} took longer than {timeout:g} s"
                         f"{' at ' + _shorten(watcher.step, 100) if watcher.step else ''}") from None
    except aiodocker.DockerError as exc:
        raise watcher.failure(exc.message) from exc
    except aiohttp.ClientError as exc:
        raise EngineUnavailable(f"lost the Docker engine while building {image} ({exc}): "
                                "run scripts/ensure-engine.sh") from exc
    if watcher.image_id is None:  # engines before API 1.30 report no aux ID; ask by tag
        async with engine_deadline(f"inspect image {tag}"):
            watcher.image_id = (await docker.images.inspect(tag))["Id"]
    return watcher.image_id


class _Watcher:
    """Follows the build stream: current step, recent output, the resulting image ID."""

    def __init__(self, image: str, progress: Progress) -> None:
        self.image, self.progress = image, progress
        self.step: str | None = None
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.image_id: str | None = None
        self.partial = {False: "", True: ""}  # stdout's and stderr's output after their last line's end
        self.in_stderr = False  # the engine wraps a step's stderr in ERR_ON ... ERR_OFF

    def feed(self, item: dict[str, Any]) -> None:
        if "error" in item:  # aiodocker normally raises first; kept in case it does not
            raise self.failure(str(item["error"]))
        if isinstance(item.get("aux"), dict) and "ID" in item["aux"]:
            self.image_id = item["aux"]["ID"]
        if "stream" not in item:
            if item.get("status"):
                self._line(ANSI.sub("", str(item["status"])).rstrip())
            return
        # A step's output arrives in pieces that need not end at a line's end (apt writes its
        # "E" and the rest of the line apart, and stdout may come between them): each stream's
        # lines are cut where its own text says.
        for piece in ENGINE_COLOUR.split(str(item["stream"])):
            if piece in (ERR_ON, ERR_OFF):
                self.in_stderr = piece == ERR_ON
                continue
            *lines, self.partial[self.in_stderr] = (self.partial[self.in_stderr] + piece).split("\n")
            for text in lines:
                self._flush(text)

    def _flush(self, text: str) -> None:
        for piece in ANSI.sub("", text).splitlines():
            if piece.strip():
                self._line(piece.rstrip())

    def _line(self, text: str) -> None:
        if text.startswith("Step "):
            self.step = text
            self.tail.clear()
            self.progress(Line(self.image, text))
            return
        if not BOOKKEEPING.match(text):  # the engine's own lines say nothing about a failure
            self.tail.append(text)
        self.progress(Line(self.image, text, detail=True))

    def failure(self, message: str) -> ImageError:
        for stream, rest in self.partial.items():
            if rest:
                self._flush(rest)
                self.partial[stream] = ""
        for text in self.tail:
            self.progress(Line(self.image, f"| {text}"))
        where = f" at {_shorten(self.step, 100)}" if self.step else ""
        return ImageError(f"building {self.image} failed{where}: {_shorten(_why(message), 200)}{self._cause()}")

    def _cause(self) -> str:
        """The step's own last word on why: apt's `E:` line, else its last line of output."""
        lines = [text for text in self.tail if text.strip()]
        # apt's error can follow a progress line it had not ended ("Building dependency tree...E: ...")
        errors = [text[found.start():] for text in lines if (found := APT_ERROR.search(text))]
        if errors:
            return f" ({_shorten(errors[-1], 200)})"
        return f" ({_shorten(lines[-1], 200)})" if lines else ""


def _why(message: str) -> str:
    """'The command '/bin/sh -c …' returned a non-zero code: 100' -> 'the command exited with 100'."""
    found = re.search(r"returned a non-zero code: (\d+)", message)
    return f"the command exited with {found.group(1)}" if found else " ".join(message.split())


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
