"""Build contexts: which files go in, their content hash, and the tar sent to the engine.

Everything here is synchronous file work; callers run it in a thread. Modes are normalised the way
a git checkout would give them (0644, or 0755 when executable; directories 0755) and owners are
root, so the data directory's own permissions (often read-only) never leak into an image and never
change a hash. The driver goes in as one zipapp built here, in memory, from the icdriver package:
the same sources always give the same bytes, so the hash stays put between runs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from foundation.errors import ImageError
from foundation.settings import data_path
from orchestrator.images.specs import DRIVER, IMAGES_DIR, ImageSpec

HASH_SCHEME = "intercode-context-v1"  # bump when the hash's inputs change meaning
DRIVER_ARCNAME = "driver/icdriver.pyz"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: every member carries it
# The zipapp's entry point; the package's own __main__ reads the arguments.
ZIPAPP_MAIN = b"from icdriver.__main__ import main\n\nmain()\n"


@dataclass(frozen=True)
class Entry:
    arcname: str
    source: Path | None  # None for a directory that exists only in the context
    kind: str  # "file", "dir" or "link"
    mode: int
    content: bytes | None = None  # a file made here rather than read from `source`


def collect(spec: ImageSpec, data_dir: Path) -> list[Entry]:
    """Every entry of the spec's context, sorted; raises DataDirError for missing data. A user's
    directory (`context_dir`) is the whole context, less what its .dockerignore leaves out."""
    if spec.context_dir is not None:
        return sorted(_user_context(spec.context_dir), key=lambda e: e.arcname)
    entries = [_entry("Dockerfile", _project_file(spec.dockerfile)),
               Entry(DRIVER_ARCNAME, None, "file", 0o644, driver_zipapp(DRIVER)), Entry("data", None, "dir", 0o755)]
    entries += [_entry(rel, _project_file(rel)) for rel in spec.files]
    for arcname, relative in spec.data.items():
        entries += _walk(f"data/{arcname}", data_path(data_dir, relative), set(spec.exclude))
    return sorted(entries, key=lambda e: e.arcname)


def inputs_hash(entries: list[Entry], buildargs: Mapping[str, str], parent_id: str) -> str:
    """sha256 over the context (paths, kinds, modes, contents), the build args and the parent image."""
    digest = hashlib.sha256(HASH_SCHEME.encode())
    for entry in entries:
        digest.update(f"\0{entry.arcname}\0{entry.kind}\0{entry.mode:o}\0".encode())
        if entry.kind == "file":
            for chunk in _chunks(entry):
                digest.update(chunk)
        elif entry.kind == "link":
            digest.update(_link_target(entry).encode())
    digest.update(json.dumps(sorted(buildargs.items())).encode())
    digest.update(parent_id.encode())
    return digest.hexdigest()


def driver_zipapp(package: Path) -> bytes:
    """The driver package as a zipapp, deterministic: its sources only (no __pycache__), sorted,
    stored uncompressed (no zlib version can change the bytes), every date and mode the same."""
    members = {"__main__.py": ZIPAPP_MAIN}
    for path in package.rglob("*.py"):
        if "__pycache__" not in path.parts:
            members[f"{package.name}/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = 0o644 << 16
            archive.writestr(info, members[name])
    return out.getvalue()


def write_tar(entries: list[Entry]) -> IO[bytes]:
    """An uncompressed tar of the context in an anonymous temporary file, rewound."""
    out = tempfile.TemporaryFile(prefix="intercode-context-")  # noqa: SIM115 - the caller closes it
    try:
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                _add(tar, entry)
        out.seek(0)
        return out
    except BaseException:
        out.close()
        raise


def _add(tar: tarfile.TarFile, entry: Entry) -> None:
    info = tarfile.TarInfo(entry.arcname)
    info.mode, info.uid, info.gid, info.uname, info.gname = entry.mode, 0, 0, "root", "root"
    if entry.source is not None:
        info.mtime = int(entry.source.lstat().st_mtime)  # a file made here (the driver) keeps 0
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif entry.kind == "link":
        info.type, info.linkname = tarfile.SYMTYPE, _link_target(entry)
        tar.addfile(info)
    elif entry.content is not None:
        info.size = len(entry.content)
        tar.addfile(info, io.BytesIO(entry.content))
    else:
        assert entry.source is not None
        with entry.source.open("rb") as fh:
            info.size = os.fstat(fh.fileno()).st_size
            tar.addfile(info, fh)


def _chunks(entry: Entry) -> Iterator[bytes]:
    """A file entry's content, a megabyte at a time."""
    if entry.content is not None:
        yield entry.content
        return
    assert entry.source is not None
    with entry.source.open("rb") as fh:
        yield from iter(lambda: fh.read(1 << 20), b"")


def _link_target(entry: Entry) -> str:
    assert entry.source is not None
    return os.readlink(entry.source)


def _project_file(relative: str) -> Path:
    path = IMAGES_DIR / relative
    if not path.is_file():  # a broken checkout, not a user mistake about data
        raise ImageError(f"{path} is missing from the project's images/ directory")
    return path


def _entry(arcname: str, path: Path) -> Entry:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return Entry(arcname, path, "link", 0o777)
    if stat.S_ISDIR(st.st_mode):
        return Entry(arcname, path, "dir", 0o755)
    if not stat.S_ISREG(st.st_mode):
        raise ImageError(f"{path}: only regular files, directories and symlinks can go into an image")
    return Entry(arcname, path, "file", 0o755 if st.st_mode & 0o111 else 0o644)


def _walk(arcname: str, path: Path, exclude: set[str]) -> list[Entry]:
    """The entry for path and, for a directory, everything under it except excluded names."""
    entry = _entry(arcname, path)
    if entry.kind != "dir":
        return [entry]
    found = [entry]
    for child in sorted(path.iterdir()):
        if child.name not in exclude:
            found += _walk(f"{arcname}/{child.name}", child, exclude)
    return found


def _user_context(root: Path) -> list[Entry]:
    if not root.is_dir():
        raise ImageError(f"{root} is not a directory: it is the build context of an image")
    ignored = dockerignore(root)
    found: list[Entry] = []
    for child in sorted(root.iterdir()):
        found += [e for e in _walk(child.name, child, set()) if not ignored(e.arcname)]
    return found


def dockerignore(root: Path) -> Callable[[str], bool]:
    """Whether a context path is left out by `root/.dockerignore` (Docker's rules: patterns with
    `*`, `?` and `**`, a directory's pattern covering what is under it, the last match winning, `!`
    taking a path back). The Dockerfile and .dockerignore themselves always go in."""
    path = root / ".dockerignore"
    rules: list[tuple[re.Pattern[str], bool]] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                keep = line.startswith("!")
                pattern = os.path.normpath(line.lstrip("!").strip().strip("/")) or "."
                rules.append((re.compile(_glob(pattern) + r"(/.*)?"), keep))

    def ignored(arcname: str) -> bool:
        if arcname in ("Dockerfile", ".dockerignore"):
            return False
        verdict = False
        for pattern, keep in rules:
            if pattern.fullmatch(arcname):
                verdict = not keep
        return verdict

    return ignored


def _glob(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):  # any directories, or none
            out.append("(.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def describe(entries: list[Entry]) -> str:
    """'12 files, 3.4 MB' — for progress lines."""
    files = [e for e in entries if e.kind == "file"]
    size = sum(len(e.content) if e.content is not None else e.source.stat().st_size if e.source is not None else 0
               for e in files)
    return f"{len(files)} files, {size / 1e6:.1f} MB"

