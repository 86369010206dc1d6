"""Images: the specs of every environment's image, and building them (`python -m orchestrator images`).

Public API: `build_images`, `image_status`, `ensure_base`, the spec registry (`SPECS`, `get`) and
the progress line type (`Line`).
"""

from orchestrator.images.base import ensure_base
from orchestrator.images.build import (
           BuildResult,
           ImageState,
           ImageStatus,
           build_images,
           image_status,
)
from orchestrator.images.engine_build import Line, Progress
from orchestrator.images.specs import BASE_IMAGE, SPECS, ImageSpec, get

__all__ = ["BASE_IMAGE", "SPECS", "BuildResult", "ImageSpec", "ImageStatus", "Line", "Progress", "ImageState",
           "build_images", "ensure_base", "get", "image_status"]
