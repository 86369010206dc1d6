"""What the NL2Bash file systems hold, read from the data's tarballs (no container needed): every
path of each, which of them its set-up made at build time and which it dated explicitly
(`touch -m -t 2023...`), as `images/common/redate.py` tells them apart.

File system 4 adds nothing to the base image: it has no paths of its own.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from pathlib import Path

NUMBERS = (1, 2, 3, 4)
TARBALL = "nl2bash/fs/fs_{}.tar"
DAY_S = 86400  # redate.py's window: entries within a day of the newest are the build's


@dataclass(frozen=True)
class FileSystem:
    number: int
    paths: frozenset[str] = frozenset()  # absolute, directories without a trailing slash
    build_names: frozenset[str] = frozenset()  # base names of what the set-up made at build time
    explicit_names: frozenset[str] = frozenset()  # ... and of what it dated explicitly
    explicit_years: tuple[int, ...] = ()
    roots: tuple[str, ...] = field(default=())  # its top-level paths (/testbed, /index.html)

    @property
    def dataset(self) -> str:
        return f"nl2bash-fs{self.number}"


def load_file_systems(data_dir: Path) -> dict[int, FileSystem]:
    """Every NL2Bash file system, by number; one without a tarball has no paths."""
    return {n: _read(n, data_dir / TARBALL.format(n)) for n in NUMBERS}


def _read(number: int, tarball: Path) -> FileSystem:
    if not tarball.is_file():
        return FileSystem(number)
    with tarfile.open(tarball) as archive:
        members = {_absolute(m.name): m.mtime for m in archive.getmembers()}
    members.pop("/", None)
    if not members:
        return FileSystem(number)
    newest = max(members.values())
    build = {p for p, mtime in members.items() if mtime >= newest - DAY_S}
    explicit = set(members) - build
    build_names = {PurePosixPath(p).name for p in build}
    explicit_names = {PurePosixPath(p).name for p in explicit}
    years = sorted({datetime.fromtimestamp(members[p], UTC).year for p in explicit})
    roots = sorted({"/" + p.strip("/").split("/")[0] for p in members})
    return FileSystem(number, frozenset(members), frozenset(build_names - explicit_names), frozenset(explicit_names),
                      tuple(years), tuple(roots))


def _absolute(name: str) -> str:
    name = name.removeprefix("./").strip("/")
    return "/" if name in ("", ".") else "/" + name
