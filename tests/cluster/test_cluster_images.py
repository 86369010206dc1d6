"""One build shipped to every host (issue 17, item 4), on a local Ray cluster of three nodes, each
with its own Docker engine (tests/cluster_fixture.py): a host that lacks an image or has one built
from other inputs is refused with one line, or sent the head's as a `docker save` archive in
pieces; afterwards every host has the head's image id and a second sync ships nothing. A host whose
image was built from the same inputs (the same inputs-hash label) keeps its own."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiodocker
import pytest
import structlog

from foundation.errors import ImageError
from orchestrator.images.build import HASH_LABEL
from tests.cluster_fixture import LocalCluster, killed
from tests.second_engine import image_id

# A Ray cluster of three nodes, each with an engine of its own, beside the suite's: ./dev test-long
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cluster, pytest.mark.long]
ray = pytest.importorskip("ray")

IMAGE = "intercode/python"  # the smallest of the project's images (126 MB)
HOSTS = ["intercode_host_0", "intercode_host_1", "intercode_host_2"]


@pytest.fixture(scope="module")
async def agents(cluster: LocalCluster) -> AsyncIterator[dict[str, Any]]:
    from orchestrator.cluster.agent import spawn

    run_id = f"images-{uuid.uuid4().hex[:8]}"
    spawned = {resource: spawn(resource, None, run_id) for resource in HOSTS}
    try:
        yield spawned
    finally:
        await asyncio.gather(*(agent.shutdown.remote() for agent in spawned.values()))
        await killed(spawned)


@pytest.fixture
async def head() -> AsyncIterator[aiodocker.Docker]:
    async with aiodocker.Docker() as docker:  # the main engine: node 0's, where the sweep runs
        yield docker


def build_on(host: str, tag: str, labels: dict[str, str], base: str = IMAGE) -> str:
    """A tiny image FROM `base` on engine `host`, with `labels`; returns its id."""
    flags = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    subprocess.run(["docker", "-H", host, "build", "-q", "-t", tag, *flags, "-"], input=f"FROM {base}\n",
                   capture_output=True, text=True, check=True, timeout=120)
    built = image_id(host, tag)
    assert built is not None
    return built


def inputs_hash(host: str, image: str) -> str:
    argv = ["docker", "-H", host, "image", "inspect", "--format", f'{{{{index .Config.Labels "{HASH_LABEL}"}}}}', image]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def events(captured: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in captured if event["event"] == name]


async def test_other_images_are_refused_in_one_line_then_shipped(cluster: LocalCluster, agents: dict[str, Any],
                                                                 head: aiodocker.Docker) -> None:
    from orchestrator.cluster.images import sync_images

    main, host1, host2 = cluster.engine_hosts
    ours = image_id(main, IMAGE)
    cluster.engines[0].docker("rmi", "-f", IMAGE)  # host 1 lacks it
    other = build_on(host2, IMAGE, {HASH_LABEL: "other"})  # host 2's was built from other inputs
    try:
        with pytest.raises(ImageError) as refused:
            await sync_images(head, agents, [IMAGE], ship=False)
        assert str(refused.value) == (
            "host intercode_host_1 has no intercode/python: build it there with "
            "`python -m orchestrator images build python` or let the sweep ship it "
            "(1 more not right, on intercode_host_1, intercode_host_2)")
        with pytest.raises(ImageError) as refused:
            await sync_images(head, {"intercode_host_2": agents["intercode_host_2"]}, [IMAGE], ship=False)
        assert str(refused.value) == (
            f"host intercode_host_2: its intercode/python was built from other inputs (hash other vs "
            f"{inputs_hash(main, IMAGE)} on the head): rebuild it there with "
            "`python -m orchestrator images build python` or let the sweep ship it")

        with structlog.testing.capture_logs() as captured:
            synced = await sync_images(head, agents, [IMAGE], ship=True)
        assert synced == {host: {IMAGE: ours} for host in HOSTS}
        assert [image_id(host, IMAGE) for host in cluster.engine_hosts] == [ours, ours, ours]
        shipped = events(captured, "images_shipped")
        assert sorted(event["host"] for event in shipped) == ["intercode_host_1", "intercode_host_2"]
        assert all(event["bytes"] > 100_000_000 and event["loaded"] == [f"{IMAGE}:latest"] for event in shipped)

        with structlog.testing.capture_logs() as captured:
            assert await sync_images(head, agents, [IMAGE]) == synced
        assert events(captured, "images_shipped") == []
        assert len(events(captured, "images_in_sync")) == 1
    finally:
        cluster.engines[1].docker("rmi", "-f", other)
    assert containers_left(cluster) == []


async def test_an_image_built_from_the_same_inputs_is_kept(cluster: LocalCluster, agents: dict[str, Any],
                                                           head: aiodocker.Docker) -> None:
    """Another build (another id) with the head's inputs-hash label is right as it is: the host's id
    is the one its episodes record."""
    from orchestrator.cluster.images import sync_images

    main, _, host2 = cluster.engine_hosts
    ours = image_id(main, IMAGE)
    assert ours is not None and image_id(host2, IMAGE) == ours
    own = build_on(host2, IMAGE, {HASH_LABEL: inputs_hash(main, IMAGE), "rebuilt": "here"})
    try:
        assert own != ours
        with structlog.testing.capture_logs() as captured:
            synced = await sync_images(head, agents, [IMAGE], ship=True)
        assert synced == {"intercode_host_0": {IMAGE: ours}, "intercode_host_1": {IMAGE: ours},
                          "intercode_host_2": {IMAGE: own}}
        assert events(captured, "images_shipped") == []
    finally:
        cluster.engines[1].docker("tag", ours, IMAGE)
        cluster.engines[1].docker("rmi", own)


async def test_several_images_go_to_a_host_as_one_archive(cluster: LocalCluster, agents: dict[str, Any],
                                                         head: aiodocker.Docker) -> None:
    """Two images a host lacks: saved apart on the head, joined into one archive (their shared
    layers once), loaded there in one go."""
    from orchestrator.cluster.images import sync_images

    main, host1, _ = cluster.engine_hosts
    extra = f"intercode-test/ship-{uuid.uuid4().hex[:8]}"
    extra_id = build_on(main, extra, {"intercode.test": "ship"})
    host = {"intercode_host_1": agents["intercode_host_1"]}
    try:
        cluster.engines[0].docker("rmi", "-f", IMAGE)
        with structlog.testing.capture_logs() as captured:
            synced = await sync_images(head, host, [IMAGE, extra], chunk_bytes=3 << 20)
        assert synced == {"intercode_host_1": {IMAGE: image_id(main, IMAGE), extra: extra_id}}
        assert image_id(host1, IMAGE) == image_id(main, IMAGE) and image_id(host1, extra) == extra_id
        [shipped] = events(captured, "images_shipped")
        assert sorted(shipped["loaded"]) == sorted([f"{IMAGE}:latest", f"{extra}:latest"])
        [saved] = events(captured, "image_archive_saved")
        assert saved["bytes"] < 1.2 * int(cluster.engines[0].docker("image", "inspect", "--format", "{{.Size}}",
                                                                     IMAGE))  # the shared layers once
    finally:
        for engine in (None, cluster.engines[0]):
            argv = ["docker", *(["-H", engine.host] if engine else []), "rmi", "-f", extra]
            subprocess.run(argv, capture_output=True, timeout=60)


async def test_the_loader_drops_abandoned_archives_and_refuses_a_bad_one(head: aiodocker.Docker) -> None:
    from orchestrator.cluster.images import ImageLoader

    loader = ImageLoader(kept=2)
    for token in ("a", "b", "c"):
        assert await loader.feed(head, token, b"piece", last=False) is None
    assert list(loader.spools) == ["b", "c"]  # "a" was abandoned: its file is closed, so freed
    with pytest.raises(ImageError) as refused:
        await loader.feed(head, "c", b"not a tar archive", last=True)
    assert "\n" not in str(refused.value) and str(refused.value).startswith("the engine did not load image archive c")
    assert list(loader.spools) == ["b"]
    loader.drop("b")
    assert loader.spools == {}


def containers_left(cluster: LocalCluster) -> list[str]:
    return [line for engine in cluster.engines for line in engine.docker("ps", "-aq").split()]


async def test_an_image_the_head_lacks_is_one_line(head: aiodocker.Docker) -> None:
    from orchestrator.cluster.images import sync_images

    with pytest.raises(ImageError) as refused:
        await sync_images(head, {}, ["intercode/no-such-image"])
    assert str(refused.value) == "the head's engine has no intercode/no-such-image: build it (not one of ours)"
