"""The original's images, derived at run time from its Dockerfiles, on our base image.

Nothing can be pulled here, so each of the original's Dockerfiles (read from the original's tree,
never copied into the project) is rewritten instruction by instruction: its base image becomes
`debian:bookworm-slim`, Ubuntu package names become Debian's, `pip install` becomes the Debian
package, and `ENV file_system_version` picks the NL2Bash file system. What the original's images
had on top stays as it was: the set-up scripts, the apt lines (recommends included), the git commit
of the root, the WORKDIR, and no md5deep. Two things stand in for what the original's base images
brought: bash 5.1 (`ubuntu:latest` was 22.04 when the recordings were made) and, for the MySQL
image, MariaDB with the shared Spider dump loaded at build time (the original loaded BIRD's, which
is not shipped) and the compose file's server flags.

Each image carries the label `icdiff.inputs-hash` (its context and the base image's id), so a second
run builds nothing.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiodocker

from foundation.settings import PROJECT_ROOT, data_path
from orchestrator.images.base import ensure_base
from orchestrator.images.build_context import Entry, inputs_hash, write_tar
from orchestrator.images.engine_build import Line, find_image, run_build
from orchestrator.images.specs import BASE_IMAGE

ORIGINAL_DIR = Path(os.environ.get("INTERCODE_ORIGINAL_DIR", PROJECT_ROOT.parent / "shared" / "intercode-original"))
PREFIX = "icdiff-original"
HASH_LABEL = "icdiff.inputs-hash"
DERIVATION = "icdiff-derive-v2"  # bump when the rewriting rules change

# Ubuntu's package names that Debian spells otherwise.
PACKAGES = {"netcat": "netcat-openbsd"}
# What Ubuntu's image and its dependencies brought that Debian's do not: `ps`, `uptime` and `w`
# (procps) ran in the recordings (fs 4 #5, #25), and are missing from Debian's closure of the same line.
UBUNTU_EXTRA = ("procps",)
# `pip install NAME` -> the Debian package, and what makes it importable under pip's name.
PIP = {"rpyc": ("python3-rpyc", ""),
       "pycryptodome": ("python3-pycryptodome", "ln -s Cryptodome /usr/lib/python3/dist-packages/Crypto")}
BASH_51 = ("RUN echo 'deb http://deb.debian.org/debian bullseye main' > /etc/apt/sources.list.d/bullseye.list"
           " && apt-get update && apt-get install -y --allow-downgrades bash/bullseye && apt-mark hold bash"
           " && rm /etc/apt/sources.list.d/bullseye.list && rm -rf /var/lib/apt/lists/*")
APT = "apt-get update && apt-get install -y {} && rm -rf /var/lib/apt/lists/*"
# What the mysql image's entrypoint did at a first start, done at build time: initialise the data
# directory with the server's flags, run every dump in /docker-entrypoint-initdb.d, stop cleanly.
SQL_INIT = """#!/bin/sh
set -eu
flags="$*"
install -d -o mysql -g mysql /run/mysqld
mariadb-install-db --user=mysql --datadir=/var/lib/mysql $flags >/dev/null
mariadbd --user=mysql --skip-networking $flags &
until mariadb-admin --silent ping >/dev/null 2>&1; do sleep 0.25; done
for dump in /docker-entrypoint-initdb.d/*.sql; do mariadb < "$dump"; done
mariadb-admin shutdown
wait
"""


@dataclass(frozen=True)
class OriginalImage:
    name: str
    dockerfile: str  # under the original's docker/
    env: dict[str, str] = field(default_factory=dict)  # ENV values set per image
    data: dict[str, str] = field(default_factory=dict)  # context path -> data-dir path
    sources: dict[str, str] = field(default_factory=dict)  # a COPY/ADD source -> the context path used instead

    @property
    def tag(self) -> str:
        return f"{PREFIX}-{self.name}:latest"

    @property
    def repository(self) -> str:
        return f"{PREFIX}-{self.name}"


IMAGES = {
    **{f"nl2bash-fs{n}": OriginalImage(f"nl2bash-fs{n}", "nl2bash.Dockerfile", env={"file_system_version": str(n)})
       for n in (1, 2, 3, 4)},
    "python": OriginalImage("python", "python.Dockerfile"),
    "ctf": OriginalImage("ctf", "ctf.Dockerfile", data={"data/ctf/task_assets": "ctf/task_assets"}),
    # The original's sql.Dockerfile loads BIRD's dump, which is not shipped; Spider's is.
    "sql": OriginalImage("sql", "sql.Dockerfile",
                         data={"data/sql/spider/ic_spider_dbs.sql": "sql/spider/ic_spider_dbs.sql"},
                         sources={"data/sql/bird/ic_bird_dbs.sql": "data/sql/spider/ic_spider_dbs.sql"}),
}


def instructions(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined; comments and blank lines dropped."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(" ".join((pending + line).split()))
        pending = ""
    if pending.strip():
        out.append(" ".join(pending.split()))
    return out


def derive(text: str, image: OriginalImage, server_flags: list[str] | None = None) -> str:
    """The original's Dockerfile `text`, rewritten to build on our base image (see the module)."""
    out: list[str] = [f"# Derived at run time from the original's docker/{image.dockerfile} ({DERIVATION})"]
    pin_bash = False
    for instruction in instructions(text):
        word, _, rest = instruction.partition(" ")
        word = word.upper()
        if word == "FROM":
            lines, pin_bash = _from(rest.strip())
            out += lines
        elif word == "RUN" and re.match(r"pip3? install ", rest):
            out.append(_pip(rest))
        elif word == "RUN" and "apt-get install" in rest:
            out.append("RUN " + _debian_packages(rest, UBUNTU_EXTRA if pin_bash else ()))
            if pin_bash:
                out.append(BASH_51)
                pin_bash = False
        elif word in ("COPY", "ADD"):
            out.append(_copy(word, rest, image.sources))
        elif word == "ENV" and "=" in rest and rest.split("=", 1)[0] in image.env:
            key = rest.split("=", 1)[0]
            out.append(f"ENV {key}={image.env[key]}")
        elif word == "ENV" and rest.startswith("MYSQL_"):
            continue  # the mysql image's entrypoint settings; the dump makes its own user
        else:
            out.append(instruction)
    if any(line.endswith(" /docker-entrypoint-initdb.d/") for line in out):
        flags = " ".join(shlex.quote(flag) for flag in server_flags or [])
        out.append(f"RUN sh /usr/local/bin/icdiff-sql-init.sh {flags}")
        cmd = ["mariadbd", "--user=mysql", "--bind-address=0.0.0.0", "--skip-name-resolve", *(server_flags or [])]
        out.append("CMD " + "[" + ", ".join(f'"{part}"' for part in cmd) + "]")
    out.append(f"LABEL icdiff.original={image.dockerfile}")
    return "\n".join(out) + "\n"


def _from(base: str) -> tuple[list[str], bool]:
    """Our base image for the original's, and whether bash 5.1 must be pinned after its apt line."""
    if base.startswith("ubuntu"):
        return [f"FROM {BASE_IMAGE}"], True
    if base.startswith("python"):
        return [f"FROM {BASE_IMAGE}", "RUN " + APT.format("python3 python-is-python3")], False
    if base.startswith("mysql"):
        server = "RUN " + APT.format("mariadb-server") + " && find /var/lib/mysql -mindepth 1 -delete"
        return [f"FROM {BASE_IMAGE}", server, "COPY icdiff-sql-init.sh /usr/local/bin/"], False
    raise ValueError(f"no rule for the original's base image {base!r}")


def _debian_packages(command: str, extra: tuple[str, ...]) -> str:
    command = re.sub(r"\S+", lambda m: PACKAGES.get(m.group(0), m.group(0)), command)
    return re.sub(r"(apt-get install -y)", lambda m: " ".join((m.group(1), *extra)), command, count=1)


def _pip(command: str) -> str:
    names = command.split()[2:]
    packages = [PIP[name][0] for name in names]
    aliases = [PIP[name][1] for name in names if PIP[name][1]]
    return "RUN " + " && ".join([APT.format(" ".join(packages)), *aliases])


def _copy(word: str, rest: str, replace: dict[str, str]) -> str:
    """Sources relative to the original's build context (the repository root); `../` clamps there."""
    parts = rest.split()
    sources = [part.removeprefix("../").removeprefix("./") for part in parts[:-1]]
    sources = [replace.get(source, source) for source in sources]
    if parts[-1].rstrip("/") == "/docker-entrypoint-initdb.d":  # the dump, for the init step above
        return f"COPY {' '.join(sources)} /docker-entrypoint-initdb.d/"
    return f"{word} {' '.join(sources)} {parts[-1]}"


def compose_flags(original: Path = ORIGINAL_DIR) -> list[str]:
    """The MySQL server's flags from the original's compose file (`command: --lower_case_table_names=1`)."""
    text = (original / "docker" / "sql-docker-compose.yml").read_text()
    found = re.search(r"^\s*command:\s*(.+)$", text, re.M)
    return shlex.split(found.group(1)) if found else []


def context(image: OriginalImage, data_dir: Path, scratch: Path, original: Path = ORIGINAL_DIR) -> list[Entry]:
    """The build context: the derived Dockerfile, the original's docker/ tree, the data it COPYs."""
    text = (original / "docker" / image.dockerfile).read_text()
    flags = compose_flags(original) if image.name == "sql" else []
    (scratch / "Dockerfile").write_text(derive(text, image, flags))
    (scratch / "icdiff-sql-init.sh").write_text(SQL_INIT)
    entries = [_file("Dockerfile", scratch / "Dockerfile"), _file("icdiff-sql-init.sh", scratch / "icdiff-sql-init.sh")]
    entries += _walk("docker", original / "docker")
    for arcname, relative in image.data.items():
        entries += _parents(arcname) + _walk(arcname, data_path(data_dir, relative))
    return sorted(set(entries), key=lambda e: e.arcname)


def _file(arcname: str, path: Path) -> Entry:
    return Entry(arcname, path, "file", 0o755 if path.stat().st_mode & 0o111 else 0o644)


def _parents(arcname: str) -> list[Entry]:
    parts = arcname.split("/")[:-1]
    return [Entry("/".join(parts[:i]), None, "dir", 0o755) for i in range(1, len(parts) + 1)]


def _walk(arcname: str, path: Path) -> list[Entry]:
    if path.is_symlink():
        return [Entry(arcname, path, "link", 0o777)]
    if not path.is_dir():
        return [_file(arcname, path)]
    entries = [Entry(arcname, path, "dir", 0o755)]
    for child in sorted(path.iterdir()):
        entries += _walk(f"{arcname}/{child.name}", child)
    return entries


async def ensure_images(docker: aiodocker.Docker, names: list[str], data_dir: Path,
                        say: Callable[[str], None] = print) -> dict[str, str]:
    """Build the named original images that are missing or stale; name -> tag."""
    base_id = await ensure_base(docker)
    tags = {}
    for name in names:
        image = IMAGES[name]
        with tempfile.TemporaryDirectory(prefix="icdiff-") as scratch:  # file work in a thread, off the loop
            entries = await asyncio.to_thread(context, image, data_dir, Path(scratch))
            digest = await asyncio.to_thread(inputs_hash, entries, {"derivation": DERIVATION}, base_id)
            found = await find_image(docker, image.tag)
            if found is not None and (found["Config"].get("Labels") or {}).get(HASH_LABEL) == digest:
                tags[name] = image.tag
                continue
            say(f"building the original's {name} image ({image.tag}) from docker/{image.dockerfile}")
            with await asyncio.to_thread(write_tar, entries) as tar:
                await run_build(docker, name, tar, tag=image.tag, labels={HASH_LABEL: digest},
                                progress=lambda line: _progress(line, say))
        tags[name] = image.tag
    return tags


def _progress(line: Line, say: Callable[[str], None]) -> None:
    if not line.detail:
        say(f"  {line.image}: {line.text}")
