"""Opening a sweep's results database for reading: report, export and compare share this.

Read-only (a sweep may still be writing: whatever is committed is read). Bad input (no
directory, no database, not a results database) becomes one ConfigError line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from foundation.errors import ConfigError
from orchestrator.store.store import DB_NAME

REQUIRED_TABLES = ("meta", "runs", "episodes", "turns")


def database_path(outdir: Path) -> Path:
    """OUTDIR/results.db, or a ConfigError saying what to do when it isn't there."""
    if not outdir.is_dir():
        raise ConfigError(f"{outdir} is not a directory: give the output directory of a sweep")
    path = outdir / DB_NAME
    if not path.is_file():
        raise ConfigError(f"{outdir} has no {DB_NAME}: run `python -m orchestrator sweep FILE` first")
    return path


@contextmanager
def read_only(outdir: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to OUTDIR/results.db, checked to be one of ours."""
    path = database_path(outdir)
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            missing = [name for name in REQUIRED_TABLES if name not in present]
            if missing:
                raise ConfigError(f"{path} is not a results database (missing tables: {', '.join(missing)})")
            yield db
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a readable results database ({exc})") from None
