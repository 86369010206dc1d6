"""Reading a sweep's results store in tests (and benchmarks): rows of a query, the file closed after."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path


def rows(outdir: Path, sql: str, args: tuple = ()) -> list[tuple]:
    """The rows `sql` selects from OUTDIR/results.db."""
    with closing(sqlite3.connect(outdir / "results.db")) as db:
        return db.execute(sql, args).fetchall()
