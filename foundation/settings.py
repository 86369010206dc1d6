"""Where the benchmark data lives: `--data-dir`, else $INTERCODE_DATA_DIR, else the shared default.

The data is never copied into the project; builds and tasks read it from this directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from foundation.errors import DataDirError

DATA_DIR_ENV = "INTERCODE_DATA_DIR"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = PROJECT_ROOT.parent / "shared" / "intercode-data"
HOW_TO_FIX = f"pass --data-dir DIR or set {DATA_DIR_ENV}"


def resolve_data_dir(flag: str | os.PathLike[str] | None = None) -> Path:
    """The data directory to use; raises DataDirError when it does not exist."""
    if flag:
        path, source = Path(flag), "--data-dir"
    elif os.environ.get(DATA_DIR_ENV):
        path, source = Path(os.environ[DATA_DIR_ENV]), DATA_DIR_ENV
    else:
        path, source = DEFAULT_DATA_DIR, "the default"
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise DataDirError(f"data directory {path} (from {source}) does not exist: {HOW_TO_FIX}")
    return path


def data_path(data_dir: Path, relative: str) -> Path:
    """A file or directory inside the data directory; raises DataDirError naming it when missing."""
    path = data_dir / relative
    if not path.exists():
        raise DataDirError(f"{path} is missing from the data directory: {HOW_TO_FIX}")
    return path


CACHE_DIR_ENV = "INTERCODE_CACHE_DIR"


def cache_dir() -> Path:
    """Where results that depend only on an image (gold outputs, keyed by image digest) are kept
    across runs: $INTERCODE_CACHE_DIR, else $XDG_CACHE_HOME/intercode-orchestrator, else
    ~/.cache/intercode-orchestrator."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "intercode-orchestrator"
