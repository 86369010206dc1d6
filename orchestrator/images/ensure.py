"""Every command that runs tasks builds the images they need first, when missing or out of date
(their inputs hash): sweep, validate and replay alike. `ensure_each` builds what it can and names
each image that failed, so that a task whose Dockerfile fails costs only its own episodes."""

from __future__ import annotations

from pathlib import Path

import structlog

from foundation.errors import ImageError
from foundation.settings import DEFAULT_DATA_DIR
from orchestrator.images.build import build_each, image_status
from orchestrator.images.engine_build import Line, Progress

log = structlog.get_logger(__name__)


async def ensure_images(images: list[str], data_dir: Path | None) -> None:
    """Build the images the sweep needs that are missing or out of date (only those); ImageError
    for the first that failed."""
    failed = await ensure_each(images, data_dir)
    if failed:
        raise ImageError(next(iter(failed.values())))


async def ensure_each(images: list[str], data_dir: Path | None, progress: Progress | None = None) -> dict[str, str]:
    """Build the images that are missing or out of date, several at once; each image (as the tasks
    name it, `intercode/NAME`) that could not be built, with why in one line. ImageError for an
    image no spec makes."""
    directory = data_dir or DEFAULT_DATA_DIR
    stale = [s.name for s in await image_status(images, directory) if str(s.state) != "present"]
    if not stale:
        return {}
    log.warning("building_images", images=stale)
    _, failures = await build_each(stale, directory, progress=progress or _progress)
    failed = {failure.tag.removesuffix(":latest"): failure.error for failure in failures}
    return {image: failed[image] for image in images if image in failed}


def _progress(line: Line) -> None:
    """Each image's start and end on the console (warnings go there), every step in the log."""
    if line.detail:
        return
    if line.text.startswith(("building ", "built ", "failed: ")):
        log.warning("image", image=line.image, status=line.text)
    else:
        log.info("image", image=line.image, status=line.text)
