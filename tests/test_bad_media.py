"""Stores and output directories on read-only media and on a full disk, for real: a small tmpfs
of the test's own, remounted read-only or filled up (root only; always unmounted)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.test_cli import assert_one_line_error, run

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@pytest.fixture
def disk(tmp_path) -> Iterator[Path]:
    """An 8 MB tmpfs of this test's own."""
    path = tmp_path / "disk"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextmanager
def read_only(disk: Path) -> Iterator[None]:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        yield
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)


def test_a_sweep_into_an_output_directory_on_read_only_media_is_one_line(disk, tmp_path):
    (disk / "out").mkdir()
    path = tmp_path / "s.toml"
    path.write_text(f'name = "t"\noutput = "{disk / "out"}"\nstrategies = ["single"]\n'
                    '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n')
    with read_only(disk):
        assert_one_line_error(run("sweep", str(path), "--quiet"), "sweep.log", "read-only media", "output")
        assert_one_line_error(run("sweep", str(path), "--quiet", "--output", str(disk / "new")), "read-only media")
