"""Images on every host (issue 17, item 4): one build, shipped to the hosts that lack it.

Placeholder interface, filled in by the image-shipping work:
- `image_facts(docker, images)`: on a node, each image's id and inputs-hash label (None: missing).
- `ImageLoader.feed(docker, token, chunk, last)`: on a node, receives a `docker save` archive in
  pieces and loads it on the last.
"""

from __future__ import annotations

from typing import Any

import aiodocker


async def image_facts(docker: aiodocker.Docker, images: list[str]) -> dict[str, Any]:
    raise NotImplementedError


class ImageLoader:
    async def feed(self, docker: aiodocker.Docker, token: str, chunk: bytes, last: bool) -> list[str] | None:
        raise NotImplementedError
