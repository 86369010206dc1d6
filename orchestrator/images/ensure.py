"""Every command that runs tasks builds the images they need first, when missing or out of date
(their inputs hash): sweep, validate and replay alike."""

from __future__ import annotations

from pathlib import Path

import structlog

from foundation.errors import ImageError
from foundation.settings import DEFAULT_DATA_DIR
from orchestrator.images.build import build_images, image_status
from orchestrator.images.engine_build import Line
from orchestrator.images.specs import BY_NAME

log = structlog.get_logger(__name__)


async def ensure_images(images: list[str], data_dir: Path | None) -> None:
    """Build the images the sweep needs that are missing or out of date (only those)."""
    by_tag = {spec.tag.removesuffix(":latest"): name for name, spec in BY_NAME.items()}
    names = [by_tag[image] for image in images if image in by_tag]
    unknown = [image for image in images if image not in by_tag]
    if unknown:
        raise ImageError(f"no image spec for {unknown[0]}: known images are {', '.join(by_tag)}")
    directory = data_dir or DEFAULT_DATA_DIR
    stale = [s.name for s in await image_status(names, directory) if str(s.state) != "present"]
    if stale:
        log.warning("building_images", images=stale)
        await build_images(stale, directory, progress=_progress)


def _progress(line: Line) -> None:
    """Each image's start and end on the console (warnings go there), every step in the log."""
    if line.detail:
        return
    if line.text.startswith(("building ", "built ")):
        log.warning("image", image=line.image, status=line.text)
    else:
        log.info("image", image=line.image, status=line.text)
