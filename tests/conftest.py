"""Shared fixtures. Tests talk to the real Docker engine: no mocks of Docker anywhere."""

from __future__ import annotations

import getpass
import os
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from foundation import logs
from foundation.engine import engine
from foundation.pool import ImagePoolConfig, Pool
from foundation.pool.ownership import RUN
from orchestrator.images.specs import SOURCE_LABEL

PROJECT = Path(__file__).resolve().parent.parent
logs.configure(int(os.environ.get("INTERCODE_TEST_VERBOSITY", "1")))
FS1 = "intercode/nl2bash-fs1"


# What tests keep between sessions from the sweeps' cache: folders named by what they were made of
# (an image id, a hash of an agent's packages), filled once and whole (orchestrator/images/agent_layer.py),
# so every process and session may share them. An installed agent's layer is a gigabyte to copy out.
SHARED_CACHE = Path.home() / ".cache" / "intercode-orchestrator-tests"
SHARED_FOLDERS = ("agents", "runtime")


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sweeps keep gold results in a per-user cache; tests (and the sweeps they start in
    subprocesses) use one of their own, so they neither read nor leave the user's. Its folders of
    image contents are shared by the test sessions (SHARED_CACHE)."""
    path = tmp_path_factory.mktemp("cache")
    for name in SHARED_FOLDERS:
        (SHARED_CACHE / name).mkdir(parents=True, exist_ok=True)
        (path / name).symlink_to(SHARED_CACHE / name, target_is_directory=True)
    os.environ["INTERCODE_CACHE_DIR"] = str(path)
    return path


# Every image a cluster test runs, loaded into the cluster's engines once per session.
CLUSTER_IMAGES = ["intercode/nl2bash-fs1", "intercode/nl2bash-fs2", "intercode/nl2bash-fs3", "intercode/nl2bash-fs4",
                  "intercode/sql", "intercode/sql-starter", "intercode/python", "intercode/starter"]


# How to stop the session's cluster, while it runs: its last test stops it (pytest_runtest_teardown
# below), so that its nodes and engines don't take their share of the CPU from every later test.
_STOP_CLUSTER: list[Callable[[], None]] = []


@pytest.fixture(scope="session")
def cluster() -> Any:
    """One local Ray cluster of three nodes, each with its own engine (tests/cluster_fixture.py),
    for every cluster test of the session; this process joined to it. Tests leave it whole (a
    node they kill, they start again). It stops after the last test that uses it."""
    ray = pytest.importorskip("ray")
    from tests.cluster_fixture import LocalCluster

    local = LocalCluster(CLUSTER_IMAGES)
    local.__enter__()

    def stop() -> None:
        try:
            ray.shutdown()
        finally:
            local.__exit__(None, None, None)

    _STOP_CLUSTER.append(stop)
    try:
        ray.init(address=local.address, logging_level="warning", log_to_driver=False)
        yield local
    finally:
        while _STOP_CLUSTER:
            _STOP_CLUSTER.pop()()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `-n 3 --dist loadfile` (./dev test): each test module goes whole to one process, so that
    its module fixtures (a test engine of its own, a viewer's sweeps) are made once, and the cluster
    tier goes whole to one (one Ray cluster a session, its engines' bridges and data roots)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class TierScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/cluster" if nodeid.startswith("tests/cluster/") else super()._split_scope(nodeid)

    return TierScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers are folders (tests/unit, docker, cluster, browser): a test marked `docker` in
    tests/unit is an error."""
    misplaced = [item.nodeid for item in items
                 if item.nodeid.startswith("tests/unit/") and item.get_closest_marker("docker")]
    if misplaced:
        raise pytest.UsageError(f"{misplaced[0]}: a test marked docker belongs in tests/docker, not tests/unit")
    rank = {module: number for number, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: next((rank[m] for m in LONGEST_FIRST if item.nodeid.startswith(m)), len(rank)))


# The modules that take longest, longest first (measured: `--durations=0`, or --junitxml's times): the
# slow tiers' processes (`--dist loadfile --no-loadscope-reorder`, ./dev test) take modules in this
# order, so no long one starts last while the other processes have run out of work; the unit tier's
# two longest (mypy's run, 77 s with its cache cold; a virtualenv made) go first in its two processes.
# The sort is stable: the other modules, and each module's tests, keep their order.
LONGEST_FIRST = ("tests/unit/test_types.py", "tests/unit/test_setup_lock.py", "tests/cluster/",
                 "tests/docker/test_harbor_format.py", "tests/docker/test_installed_agents.py", "tests/docker/test_sweep.py",
                 "tests/docker/test_replay_robust.py", "tests/docker/test_own_tasks.py",
                 "tests/docker/test_harbor_published.py", "tests/docker/test_harbor.py", "tests/docker/test_fidelity.py",
                 "tests/docker/test_transcripts.py", "tests/docker/test_llm_load.py")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The images the session built from task folders and files of its temporary directories (each
    image is named by where its folder is, so every session makes new ones): removed once all is
    done, by the controller of `-n` runs. Images in use, and those of folders elsewhere (the
    fixtures'), stay."""
    if hasattr(session.config, "workerinput"):
        return
    made = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}"
    try:
        labelled = subprocess.run(["docker", "image", "ls", "--quiet", "--filter", f"label={SOURCE_LABEL}"],
                                  capture_output=True, text=True, timeout=60).stdout.split()
        shown = f'{{{{.Created}}}}\t{{{{index .Config.Labels "{SOURCE_LABEL}"}}}}\t{{{{join .RepoTags " "}}}}'
        listed = subprocess.run(["docker", "image", "inspect", "--format", shown, *sorted(set(labelled))],
                                capture_output=True, text=True, timeout=60) if labelled else None
        lines = listed.stdout.splitlines() if listed is not None and listed.returncode == 0 else []
        # newest first: an image built FROM another goes before it, so that neither is left untagged
        found = sorted((line.split("\t") for line in lines if line.count("\t") == 2), reverse=True)
        ours = list(dict.fromkeys(tag for _, source, tags in found if Path(source).is_relative_to(made)
                                  for tag in tags.split() if tag.startswith("intercode/")))
        if ours:
            subprocess.run(["docker", "image", "rm", *ours], capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        pass  # no engine here (the unit tier), or a slow one: the images stay, as before


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Once the session has left the last module with a test that uses the cluster (its fixtures
    of module scope, which may still call the cluster, torn down), stop it."""
    if not _STOP_CLUSTER or (nextitem is not None and getattr(nextitem, "module", None) is getattr(item, "module", None)):
        return
    items = item.session.items
    later = items[items.index(item) + 1:] if item in items else []
    if not any("cluster" in getattr(other, "fixturenames", ()) for other in later):
        while _STOP_CLUSTER:
            _STOP_CLUSTER.pop()()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ.get("INTERCODE_DATA_DIR") or PROJECT.parent / "shared" / "intercode-data")
    if not (path / "README.md").is_file():
        message = f"benchmark data dir {path} is missing: set INTERCODE_DATA_DIR"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
async def llm_worker() -> AsyncIterator[Any]:
    """One LLM worker process for the whole session, as a sweep keeps its workers for every call
    (starting one imports litellm: seconds a test otherwise). Clients get it through `Lent`."""
    from agents.llm.transport import WorkerTransport

    transport = WorkerTransport(1)
    await transport.start()
    yield transport
    await transport.aclose()


class Lent:
    """A started transport lent to one client: the client's close leaves it running for the next."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    async def start(self) -> None:
        pass

    async def call(self, request: Any) -> Any:
        return await self._transport.call(request)

    async def aclose(self) -> None:
        pass


@pytest.fixture(scope="session")
async def docker() -> AsyncIterator[aiodocker.Docker]:
    async with engine() as client:
        yield client


async def require_image(docker: aiodocker.Docker, image: str) -> str:
    try:
        await docker.images.inspect(image)
    except aiodocker.DockerError:
        pytest.fail(f"image {image} is missing: run `python -m orchestrator images build {image.split('/')[-1]}`")
    return image


@pytest.fixture
async def fs1_image(docker: aiodocker.Docker) -> str:
    return await require_image(docker, FS1)


async def containers_of_run(docker: aiodocker.Docker, run_id: str) -> list[Any]:
    return await docker.containers.list(all=True, filters={"label": [f"{RUN}={run_id}"]})


@asynccontextmanager
async def clean_runtime(docker: aiodocker.Docker, image: str, **kwargs: Any) -> AsyncIterator[Any]:
    """A Runtime for tests of one image; afterwards none of its containers may exist."""
    from environments.runtime import Runtime

    await require_image(docker, image)
    run_id = f"test-{uuid.uuid4().hex[:8]}"
    try:
        async with Runtime.open(run_id=run_id, **kwargs) as runtime:
            yield runtime
    finally:
        assert not await containers_of_run(docker, run_id), "the runtime left containers behind"


@pytest.fixture
def make_pool(docker: aiodocker.Docker) -> Callable[..., Any]:
    """`async with make_pool({image: config}) as pool` — and afterwards none of its containers exist."""

    @asynccontextmanager
    async def factory(images: dict[str, ImagePoolConfig], **kwargs: Any) -> AsyncIterator[Pool]:
        run_id = f"test-{uuid.uuid4().hex[:8]}"
        try:
            async with Pool(docker, images, run_id=run_id, **kwargs) as pool:
                yield pool
        finally:
            left = await containers_of_run(docker, run_id)
            assert not left, f"pool left {len(left)} containers behind"

    return factory
