"""Host side of the in-container driver in a container: started over one aiodocker exec stream per
container (the client itself, Docker-free, is foundation/driver_client.py).

The driver (the package icdriver, shipped in every image as one zipapp) is started once per
container; every action afterwards is one frame each way over that stream, instead of a `docker
exec` per action. A driver of another version means an image built from older sources, and is
refused.
"""

from __future__ import annotations

import asyncio

import aiodocker
from aiodocker.containers import DockerContainer

from foundation.driver_client import (HELLO_TIMEOUT, TRANSPORT_ERRORS, DriverClient, ExecResult, OtherVersion,
                                      PythonResult, PythonRun, describe, version_mismatch)
from foundation.engine import ENGINE_ERRORS, engine_call
from foundation.errors import ContainerDied, DriverLost, ImageError

__all__ = ["DRIVER_ARGV", "DRIVER_PATH", "DriverClient", "ExecResult", "PythonResult", "PythonRun", "start_driver",
           "stale_image", "version_mismatch"]

DRIVER_PATH = "/usr/lib/intercode/icdriver.pyz"
# The interpreter the image's build chose for the driver: its own python3, or the driver's runtime
# (images/own, icdriver/prepare.py); our images link their python3 there.
DRIVER_ARGV = ["/usr/lib/intercode/python3", "-B", DRIVER_PATH]
REBUILD = "./dev images"  # rebuilds the images whose inputs changed


async def start_driver(container: DockerContainer, image: str | None = None) -> DriverClient:
    """Start the driver in `container` and read its hello. `image`, the container's image,
    only names it in an error; unknown, it is asked of the engine when needed."""
    try:
        async with engine_call("start the driver", container_id=container.id):
            execution = await container.exec(DRIVER_ARGV, stdin=True, stdout=True, stderr=True, tty=False)
            stream = execution.start(detach=False)
            await stream._init()  # noqa: SLF001 — opening the upgraded connection is the readiness check
    except aiodocker.DockerError as exc:  # 4xx: the container is gone or not running
        raise ContainerDied(f"could not start the driver: {exc.message}", container_id=container.id) from exc
    client = DriverClient(container.id, stream, pid=0)
    try:
        await asyncio.wait_for(client.greet(), HELLO_TIMEOUT)
    except TRANSPORT_ERRORS as exc:
        await client.close()
        raise DriverLost(f"the driver did not say hello: {describe(exc)}", container_id=container.id) from exc
    except OtherVersion as exc:
        await client.close()
        raise ImageError(stale_image(image or await _image_of(container), exc.mismatch)) from exc
    except DriverLost as exc:
        await client.close()
        if f"can't open file '{DRIVER_PATH}'" in str(exc):  # an image from before the zipapp
            raise ImageError(stale_image(image or await _image_of(container), f"has no {DRIVER_PATH}")) from exc
        raise
    except BaseException:
        await client.close()
        raise
    return client


def stale_image(image: str, detail: str) -> str:
    """The one line that says an image's driver is out of date, and how to rebuild it."""
    return f"image {image} {detail}: it was built from older sources; rebuild it with `{REBUILD}`"


_SHOW_ERRORS: tuple[type[BaseException], ...] = (*ENGINE_ERRORS, KeyError)


async def _image_of(container: DockerContainer) -> str:
    """The image a container was made from, for an error message; its id when the engine won't say."""
    try:
        info = await container.show()
        return str(info["Config"]["Image"])
    except _SHOW_ERRORS:
        return f"of container {container.id[:12]}"
