"""report.html renders in a real browser: headless Chromium's DOM and a screenshot of the page.

Chromium comes from scripts/ensure-chromium.sh. Without it the tests skip, except under CI=true,
where a missing browser must not pass silently.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from orchestrator.report.cli import write_report
from tests.unit.test_report import ResultsDB, fill

BLUE, ORANGE = (0x00, 0x72, 0xB2), (0xE6, 0x9F, 0x00)  # the first two colours of the charts' palette


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "chromium is missing: run scripts/ensure-chromium.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def report_html(tmp_path) -> Path:
    db = ResultsDB(tmp_path / "out")
    try:
        fill(db)
    finally:
        db.close()
    write_report(db.outdir)
    return db.outdir / "report.html"


def headless(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a throwaway profile (no sandbox: tests may run as root in a container)."""
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'profile'}", *args]
    result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_dom_has_the_tables_and_plots(chromium, report_html, tmp_path):
    dom = headless(chromium, tmp_path, "--dump-dom", report_html.as_uri()).stdout
    assert '<table id="paper-table">' in dom and '<table id="cells">' in dom
    assert "50.0% (0.60)" in dom and "15.0–85.0%" in dom
    assert dom.count("<svg") == 4
    assert len(re.findall(r"<polyline [^>]*data-series=", dom)) == 3
    assert len(re.findall(r'<rect [^>]*class="bar"', dom)) == 3
    assert "<script" not in dom


def test_screenshot_shows_the_charts(chromium, report_html, tmp_path):
    shot = tmp_path / "shot.png"
    headless(chromium, tmp_path, "--hide-scrollbars", "--window-size=1280,2600", f"--screenshot={shot}",
             report_html.as_uri())
    width, height, pixels = decode_png(shot.read_bytes())
    assert (width, height) == (1280, 2600)
    colours = set(pixels)
    assert len(colours) > 50, "the page looks blank"
    assert sum(p == (255, 255, 255) for p in pixels) > len(pixels) // 2, "the background should be white"
    for colour in (BLUE, ORANGE):
        assert any(near(p, colour) for p in colours), f"no pixel of the chart colour {colour}"


def near(a: tuple[int, ...], b: tuple[int, ...], tolerance: int = 6) -> bool:
    return all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))


def decode_png(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit RGB or RGBA PNG (what Chromium writes), stdlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks, pos = {}, 8
    idat = b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        idat += body if kind == b"IDAT" else b""
        chunks.setdefault(kind, body)
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and colour_type in (2, 6), f"unexpected PNG format: depth {depth}, colour type {colour_type}"
    channels = 3 if colour_type == 2 else 4
    rows = unfilter(zlib.decompress(idat), width * channels, height, channels)
    pixels = [tuple(row[i:i + 3]) for row in rows for i in range(0, len(row), channels)]
    return width, height, pixels


def unfilter(raw: bytes, stride: int, height: int, bpp: int) -> list[bytes]:
    """Undo PNG's per-row filters (none, sub, up, average, Paeth)."""
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return rows


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c
