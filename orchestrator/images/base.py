"""The base image, debian:bookworm-slim: used if present, pulled if a registry answers, else made
locally with debootstrap and imported through a `FROM scratch` build (images/base/Dockerfile).

The debootstrap tree gets the few files that make Docker's official Debian images behave well in
builds: no service starts during apt installs, no docs/man pages/translations, no apt caches.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from pathlib import Path

import aiodocker
import aiohttp

from foundation.errors import ImageError
from orchestrator.images import proc
from orchestrator.images.engine_build import (
    Line,
    Progress,
    find_image,
    no_progress,
    run_build,
)
from orchestrator.images.specs import BASE_IMAGE, IMAGES_DIR

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
PULL_TIMEOUT = 60.0
DEBOOTSTRAP_TIMEOUT = 30 * 60.0  # a slow mirror, not a hang
TAR_TIMEOUT = 10 * 60.0
NAME = "base"  # the progress prefix

# What the official images add (debuerreotype's "slimify" and docker tweaks), path -> content.
TWEAKS = {
    # Package scripts must not start services (cron, mariadb) inside a build container.
    "usr/sbin/policy-rc.d": "#!/bin/sh\nexit 101\n",
    "etc/dpkg/dpkg.cfg.d/docker": "".join(f"path-exclude /usr/share/{p}/*\n" for p in
                                          ("doc", "groff", "info", "linda", "lintian/overrides", "locale", "man"))
                                  + "path-include /usr/share/doc/*/copyright\n",
    "etc/apt/apt.conf.d/docker-clean": (
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
        '/var/cache/apt/*.bin || true"; };\nDir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'),
    "etc/apt/apt.conf.d/docker-no-languages": 'Acquire::Languages "none";\n',
    "etc/apt/apt.conf.d/docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
}
# Left out of the image: device nodes (the engine provides /dev), apt's download lists and caches,
# and the documentation that the dpkg excludes above keep out of later installs too.
TAR_EXCLUDES = ("./dev/*", "./proc/*", "./sys/*", "./tmp/*", "./var/lib/apt/lists/*", "./var/cache/apt/*.bin",
                "./var/cache/apt/archives/*.deb", "./var/log/bootstrap.log",
                "./usr/share/man/*", "./usr/share/info/*", "./usr/share/locale/*")


async def ensure_base(docker: aiodocker.Docker, progress: Progress = no_progress) -> str:
    """The base image's ID, making the image first when the engine does not have it."""
    found = await find_image(docker, BASE_IMAGE)
    if found is not None:
        return str(found["Id"])
    progress(Line(NAME, f"{BASE_IMAGE} is not on the engine; trying to pull it"))
    if await _pull(docker, progress):
        found = await find_image(docker, BASE_IMAGE)
        if found is not None:
            return str(found["Id"])
    return await _bootstrap(docker, progress)


async def _pull(docker: aiodocker.Docker, progress: Progress) -> bool:
    try:
        async with asyncio.timeout(PULL_TIMEOUT):
            await docker.images.pull(BASE_IMAGE)
    except (aiodocker.DockerError, aiohttp.ClientError, TimeoutError) as exc:
        reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        progress(Line(NAME, f"pull failed ({' '.join(reason.split())[:120]}); building it with debootstrap"))
        return False
    return True


async def _bootstrap(docker: aiodocker.Docker, progress: Progress) -> str:
    _check_can_bootstrap()
    mirror, security = apt_sources()
    work = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="intercode-debootstrap-"))
    rootfs = work / "rootfs"
    try:
        progress(Line(NAME, f"debootstrap --variant=minbase {SUITE} from {mirror} (a few minutes)"))
        await proc.run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), mirror], image=NAME,
                       timeout=DEBOOTSTRAP_TIMEOUT, progress=progress)
        await asyncio.to_thread(_add_tweaks, rootfs, mirror, security)
        await proc.run(["tar", "-C", str(rootfs), "--numeric-owner", "--xattrs",
                        *(f"--exclude={p}" for p in TAR_EXCLUDES), "-cf", str(work / "rootfs.tar"), "."],
                       image=NAME, timeout=TAR_TIMEOUT, progress=progress)
        await proc.run(["tar", "-cf", str(work / "context.tar"), "-C", str(IMAGES_DIR / "base"), "Dockerfile",
                        "-C", str(work), "rootfs.tar"], image=NAME, timeout=TAR_TIMEOUT, progress=progress)
        progress(Line(NAME, f"importing the tree as {BASE_IMAGE}"))
        with open(work / "context.tar", "rb") as context:
            image_id = await run_build(docker, NAME, context, tag=BASE_IMAGE, progress=progress,
                                       labels={"intercode.image": "base"})
    finally:
        await asyncio.shield(remove_tree(work))
    progress(Line(NAME, f"built {BASE_IMAGE} ({image_id[:19]})"))
    return image_id


def _check_can_bootstrap() -> None:
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise ImageError(
            f"the engine has no {BASE_IMAGE} and none can be pulled; making it needs debootstrap run as root: "
            f"run scripts/ensure-engine.sh as root (it installs debootstrap), then build again as root, "
            f"or `docker load` a {BASE_IMAGE} image")


def apt_sources(root: Path = Path("/")) -> tuple[str, str | None]:
    """The host's Debian mirror (default deb.debian.org) and its security mirror, if it has one."""
    files = [root / "etc/apt/sources.list", *sorted((root / "etc/apt/sources.list.d").glob("*.list")),
             *sorted((root / "etc/apt/sources.list.d").glob("*.sources"))]
    uris: list[str] = []
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        uris += re.findall(r"^\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M)
        uris += [u for line in re.findall(r"^URIs:\s*(.+)$", text, re.M) for u in line.split()]
    uris = [u.rstrip("/") for u in uris if u.startswith(("http://", "https://"))]
    mirror = next((u for u in uris if u.endswith("/debian")), DEFAULT_MIRROR)
    security = next((u for u in uris if u.endswith("/debian-security")), None)
    return mirror, security


def _add_tweaks(rootfs: Path, mirror: str, security: str | None) -> None:
    for relative, content in TWEAKS.items():
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        path.chmod(0o755 if relative.startswith("usr/sbin/") else 0o644)
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(_deb822(mirror, security))


def _deb822(mirror: str, security: str | None) -> str:
    stanza = ("Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: main\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    text = stanza.format(uri=mirror, suites=f"{SUITE} {SUITE}-updates")
    if security:
        text += "\n" + stanza.format(uri=security, suites=f"{SUITE}-security")
    return text


async def remove_tree(path: Path) -> None:
    """Delete a debootstrap work dir. A chroot left with /proc or /dev mounted (debootstrap killed)
    is unmounted first, and rm never crosses into another file system, so the host is safe."""
    for mount in sorted(await asyncio.to_thread(_mounts_under, path), key=len, reverse=True):
        await proc.run(["umount", "-l", mount], image=NAME, timeout=60)
    if await asyncio.to_thread(path.exists):
        await proc.run(["rm", "-rf", "--one-file-system", str(path)], image=NAME, timeout=TAR_TIMEOUT)


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4] for line in fh]
    decoded = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p) for p in points]
    return [p for p in decoded if p.startswith(prefix)]
