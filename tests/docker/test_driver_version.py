"""A container whose driver is out of date (another protocol version, or none at its path) is
refused at start with one line that names the image and the command that rebuilds it."""

from __future__ import annotations

import io
import shutil
import tarfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from foundation.errors import ImageError
from foundation.pool.driver import DRIVER_PATH, start_driver
from icdriver import protocol
from orchestrator.images.build_context import driver_zipapp
from orchestrator.images.specs import DRIVER
from tests.conftest import require_image

pytestmark = pytest.mark.docker
IMAGE = "intercode/python:latest"


@pytest.fixture
async def container(docker: aiodocker.Docker) -> AsyncIterator[aiodocker.containers.DockerContainer]:
    await require_image(docker, IMAGE)
    config = {"Image": IMAGE, "Cmd": ["sleep", "infinity"], "HostConfig": {"Init": True, "NetworkMode": "none"}}
    made = await docker.containers.create(config, name=f"intercode-test-driver-{uuid.uuid4().hex[:8]}")
    try:
        await made.start()
        yield made
    finally:
        await made.delete(force=True)


def _one_file_tar(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


async def test_a_driver_of_another_version_is_refused(container: aiodocker.containers.DockerContainer,
                                                      tmp_path: Path):
    package = shutil.copytree(DRIVER, tmp_path / "icdriver", ignore=shutil.ignore_patterns("__pycache__"))
    source = (package / "protocol.py").read_text()
    (package / "protocol.py").write_text(source.replace(f"VERSION = {protocol.VERSION}\n", "VERSION = 0\n", 1))
    await container.put_archive(str(Path(DRIVER_PATH).parent),
                                _one_file_tar(Path(DRIVER_PATH).name, driver_zipapp(package)))
    with pytest.raises(ImageError) as caught:
        await start_driver(container)
    assert str(caught.value) == (f"image {IMAGE} carries driver version 0, this checkout speaks version "
                                 f"{protocol.VERSION}: it was built from older sources; rebuild it with `./dev images`")


async def test_an_image_without_the_driver_is_refused(container: aiodocker.containers.DockerContainer):
    removal = await container.exec(["rm", DRIVER_PATH])
    async with removal.start(detach=False) as stream:
        while await stream.read_out() is not None:
            pass
    with pytest.raises(ImageError, match=f"image {IMAGE} has no {DRIVER_PATH}: .*`./dev images`"):
        await start_driver(container, image=IMAGE)
