"""nightly.html renders in a real browser, trend plots included: headless Chromium's DOM and a screenshot.

The page comes from four constructed nights (`conclude` over hand-built results databases), two
cells each, the last night a regression. Without Chromium the tests skip, except under CI=true.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.nightly.compare import CompareSettings
from orchestrator.nightly.gate import GateResult
from orchestrator.nightly.nightly import NightlyOptions, conclude
from orchestrator.nightly.outcomes import from_episodes
from orchestrator.store.results import load_results
from tests.browser import test_report_browser
from tests.unit.test_compare import CELL, RunDB
from tests.browser.test_report_browser import BLUE, ORANGE, decode_png, headless, near

chromium = test_report_browser.chromium  # the fixture: skips without Chromium, fails under CI=true

REACT = ("gpt", "react", "fs1")
NIGHTS = 4


@pytest.fixture
def nightly_html(tmp_path) -> Path:
    history = tmp_path / "history.db"
    for n in range(1, NIGHTS + 1):
        run = RunDB(tmp_path / f"night{n}")
        try:
            solved = set(range(60 if n < NIGHTS else 40))  # the last night drops 20 of 100 tasks
            run.fill(solved, n=100)
            run.fill(set(range(30 + 5 * n)), n=100, cell=REACT)
        finally:
            run.close()
        options = NightlyOptions(history=history, output=run.outdir, compare=CompareSettings(resamples=1000))
        result = conclude("browser-demo", 1_700_000_000 + n * 86_400.0, run.outdir,
                          GateResult(100, {}, run.outdir / "oracle-gate"),
                          from_episodes(load_results(run.outdir).episodes), options)
    assert result.exit_code == 1
    return tmp_path / f"night{NIGHTS}" / "nightly.html"


def test_dom_has_the_verdicts_and_the_trend_plots(chromium, nightly_html, tmp_path):
    dom = headless(chromium, tmp_path, "--dump-dom", nightly_html.as_uri()).stdout
    assert '<table id="comparison">' in dom and '<table id="flips">' in dom
    assert "Status: regression" in dom and "-20.0" in dom
    assert dom.count("<svg") == 2  # success rate and mean reward
    series = re.findall(r'<polyline [^>]*data-series="([^"]+)"', dom)
    assert sorted(series) == sorted([" / ".join(CELL), " / ".join(REACT)] * 2)
    assert len(re.findall(r'<circle [^>]*class="point"', dom)) == 2 * 2 * NIGHTS
    assert "success rate 40.0% on" in dom  # the last night's point of the dropped cell
    assert "<script" not in dom


def test_screenshot_shows_the_trend_lines(chromium, nightly_html, tmp_path):
    shot = tmp_path / "shot.png"
    headless(chromium, tmp_path, "--hide-scrollbars", "--window-size=1280,2000", f"--screenshot={shot}",
             nightly_html.as_uri())
    width, height, pixels = decode_png(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    assert sum(p == (255, 255, 255) for p in pixels) > len(pixels) // 2, "the background should be white"
    colours = set(pixels)
    for colour in (BLUE, ORANGE):
        assert sum(near(p, colour) for p in pixels) > 200, f"too few pixels of the line colour {colour}"
    assert len(colours) > 50, "the page looks blank"
