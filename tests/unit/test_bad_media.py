"""Stores and output directories on read-only media and on a full disk, for real: a small tmpfs
of the test's own, remounted read-only or filled up (root only; always unmounted)."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import aiohttp
import pytest

from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.stores import written_store
from tests.unit.test_cli import assert_one_line_error, run

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


def fill(disk: Path) -> None:
    """Write until the disk is full."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


async def pages_of(outdir: Path) -> None:
    """The viewer's overview, episode list and first episode of the store, each served."""
    async with serving([Source.open(0, outdir)], "127.0.0.1", 0) as base, aiohttp.ClientSession(base) as client:
        for page in ("/s/0", "/s/0/episodes", "/s/0/episodes/1"):
            async with client.get(page) as response:
                assert response.status == 200, await response.text()


def test_a_store_on_read_only_media_is_read_by_report_export_compare_and_view(disk, tmp_path):
    baseline, current = written_store(disk / "a"), written_store(disk / "b")
    with read_only(disk):
        export = run("export", str(current), "--to", str(tmp_path / "x"))
        assert export.returncode == 0, export.stderr
        assert [p.name for p in (tmp_path / "x").iterdir()] == ["oracle__single__starter-bash.json"]
        compared = run("compare", str(baseline), str(current), "--out", str(tmp_path / "c"))
        assert compared.returncode == 0, compared.stderr
        assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["compare-a.html", "compare-a.md"]
        asyncio.run(pages_of(current))
        # What would write into the read-only directory says so, and how to go on.
        assert_one_line_error(run("report", str(current)), "report.md", "read-only media", "writable disk")
        assert_one_line_error(run("compare", str(baseline), str(current)), "read-only media", "--out")


@pytest.mark.parametrize("media", ["read-only", "full"])
def test_a_store_whose_log_holds_episodes_says_what_to_do(disk, tmp_path, media):
    # A sweep killed with its last commits in the write-ahead log, copied as it was (no -shm):
    # `immutable` would not see those commits, so the store is not read that way.
    store = written_store(tmp_path / "killed")
    with closing(sqlite3.connect(store / "results.db", isolation_level=None)) as db:
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("UPDATE episodes SET reward = 0.5 WHERE id = 1")
        shutil.copytree(store, disk / "killed", ignore=shutil.ignore_patterns("*-shm"))
    assert (disk / "killed" / "results.db-wal").stat().st_size > 0
    export = ["export", str(disk / "killed"), "--to", str(tmp_path / "x")]
    if media == "full":
        fill(disk)
        assert_one_line_error(run(*export), "results.db-wal", "the disk is full", "free some space")
    else:
        with read_only(disk):
            assert_one_line_error(run(*export), "results.db-wal", "read-only media", "copy", "writable disk")


@pytest.mark.parametrize("held", [True, False], ids=["store-held-open", "store-closed"])
def test_report_on_a_full_disk_is_one_line_and_leaves_the_last_report(disk, held):
    """Held open (a sweep or a viewer on it: SQLite's shared memory is set up), the store reads and
    the write fails; closed, reading it needs the `immutable` way, then the write fails the same."""
    out = written_store(disk / "out")
    (out / "report.md").write_text("the last report\n")
    with closing(sqlite3.connect(out / "results.db")) as reader:
        if held:
            reader.execute("SELECT count(*) FROM episodes").fetchone()
        fill(disk)
        assert_one_line_error(run("report", str(out)), "the disk is full writing", "report.md", "free some space")
    assert (out / "report.md").read_text() == "the last report\n"  # neither half-written nor emptied
    assert not (out / "report.html").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_export_on_a_full_disk_says_so_and_leaves_no_half_file(disk, tmp_path):
    out = written_store(disk / "out", episodes=200)
    fill(disk)
    assert_one_line_error(run("export", str(out)), "the disk is full writing", "free some space")
    export = out / "export" / "intercode"
    assert not export.exists() or not [p for p in export.iterdir() if p.stat().st_size == 0]


def test_a_sweep_into_an_output_directory_on_read_only_media_is_one_line(disk, tmp_path):
    (disk / "out").mkdir()
    path = tmp_path / "s.toml"
    path.write_text(f'name = "t"\noutput = "{disk / "out"}"\nstrategies = ["single"]\n'
                    '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n')
    with read_only(disk):
        assert_one_line_error(run("sweep", str(path), "--quiet"), "sweep.log", "read-only media", "output")
        assert_one_line_error(run("sweep", str(path), "--quiet", "--output", str(disk / "new")), "read-only media")
