"""Files the commands write (reports, comparisons, exports, the sweep's log): whole or not at all,
and a directory or file that cannot be written is one line saying why and what to do.

    make_directory(target, "--to", "give another directory")
    write_files({outdir / "report.md": md, outdir / "report.html": html}, "free some space")

Each file is written to a temporary file beside it and renamed over it only once every file of
the call is written, so a full disk or a kill leaves the files as they were (the last report, or
none), never a half-written one.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from foundation.errors import UserError


class CannotWrite(UserError):
    """A directory or file the command writes could not be made (read-only media, a full disk, a
    file where a directory should be, no permission)."""


def make_directory(path: Path, what: str, fix: str) -> Path:
    """`path` as a directory, made if missing; CannotWrite naming `what` (`output`, `--to`) and
    saying `fix` when it cannot be."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise CannotWrite(f"{what} {path} is not a directory (a file is in the way): {fix}") from None
    except OSError as exc:
        raise CannotWrite(cannot_write(path, exc, fix)) from None
    return path


def write_files(texts: dict[Path, str], fix: str) -> list[Path]:
    """Write each text to its path (UTF-8), all of them or none; returns the paths."""
    temporary: list[Path] = []
    current = next(iter(texts), Path("."))
    try:
        for current, text in texts.items():
            temporary.append(_written_beside(current, text))
        for temp, current in zip(temporary, texts):
            os.replace(temp, current)
    except OSError as exc:
        raise CannotWrite(cannot_write(current, exc, fix)) from None
    finally:
        for temp in temporary:
            temp.unlink(missing_ok=True)  # renamed already, unless something failed
    return list(texts)


def _written_beside(path: Path, text: str) -> Path:
    """A new file in `path`'s directory holding `text`, on disk (fsync: a file renamed before its
    data is written can be empty after a crash). Made with os.open's mode, so the umask gives it
    the permissions `path` would have had (tempfile's are 0600)."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def cannot_write(path: Path, exc: OSError, fix: str) -> str:
    """One line: which path could not be written, why, and what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full writing {path}: free some space and run the same command again"
    if exc.errno == errno.EROFS:
        return f"cannot write {path}: it is on read-only media: {fix}"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot write {path}: permission denied: {fix}"
    return f"cannot write {path}: {exc.strerror or exc}: {fix}"
