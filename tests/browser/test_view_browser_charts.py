"""The overview's charts in a real browser (headless Chromium over the DevTools protocol, as in
test_view_browser.py), on a store of three models × two strategies × three task sets, one of them
single-turn, written by the sweep's own writer: at 1,440 px the charts share rows and the page is a
fraction of the 7,400 px it was when they were stacked one per row; at 1,024 px they are one per
row and nothing runs off the page. A screenshot of the overview at 1,440 px is written under the
test's directory (its path printed) for a person to look at; the assertions read the DOM.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.store import EpisodeRecord
from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.browser.test_view_browser import Browser
from tests.stores import dialogue_record, write_episodes

MODELS = ("openai/sim-large", "openai/sim-small", "anthropic/sim-mid")
STRATEGIES = ("try_again", "react")
MULTI_TURN = ("nl2bash-fs1", "starter-bash")
SINGLE_TURN = "starter-sql"
TALLEST_PX = 4200  # the page at 1,440 px; with one chart per row, 900 px wide, it was 7,400 and more
ROWS = """(() => {
    const tops = new Map();
    for (const chart of document.querySelectorAll('.chart-grid > *')) {
        const top = Math.round(chart.getBoundingClientRect().top);
        tops.set(top, (tops.get(top) || 0) + 1);
    }
    return [...tops.values()];
})()"""


def records() -> list[EpisodeRecord]:
    """Four episodes per cell; rewards rise with the turn, by how strong the model and strategy are
    (so some curves coincide, as real ones do); the single-turn set's episodes have one turn of one."""
    made = []
    for m, model in enumerate(MODELS):
        for s, strategy in enumerate(STRATEGIES):
            for task in range(4):
                for task_set in MULTI_TURN:
                    strength = (m + s + task) % 4
                    rewards = [min(1.0, 0.25 * (k + 1) * strength / 2) for k in range(2 + task % 4)]
                    made.append(dialogue_record(task, rewards, model=model, strategy=strategy, task_set=task_set,
                                                status="solved" if rewards[-1] == 1 else "max_turns"))
                solved = (m + s + task) % 3 == 0
                one = dialogue_record(task, [1.0 if solved else 0.0], model=model, strategy=strategy,
                                      task_set=SINGLE_TURN, status="solved" if solved else "max_turns")
                made.append(dataclasses.replace(one, max_turns=1))
    return made


@pytest.fixture(scope="module")
async def site(tmp_path_factory) -> AsyncIterator[str]:
    out = tmp_path_factory.mktemp("charts") / "out"
    await write_episodes(out, "grid", records())
    async with serving([Source.open(0, out)], "127.0.0.1", 0) as base:
        yield base


async def overview(browser: Browser, site: str, width: int) -> None:
    """The overview laid out `width` px wide, once its charts are drawn."""
    await browser.window(width)
    await browser.open(f"{site}/s/0")
    await browser.wait_for("document.querySelector('#chart-tokens') !== null")


async def test_at_1440_px_the_charts_share_rows_and_the_page_is_less_than_tall(site, browser, tmp_path):
    await overview(browser, site, 1440)
    height = await browser.evaluate("document.body.scrollHeight")
    shot = await browser.screenshot(tmp_path / "overview-1440.png")
    print(f"overview at 1,440 px: {height} px tall; screenshot: {shot}")
    assert height <= TALLEST_PX
    assert max(await browser.evaluate(ROWS), default=0) >= 2, "no two charts share a row"
    fits = await browser.evaluate("[...document.querySelectorAll('svg.chart')].every(c => "
                                  "c.getBoundingClientRect().right <= document.documentElement.clientWidth)")
    assert fits


async def test_at_1024_px_the_charts_are_one_per_row_within_the_window(site, browser):
    await overview(browser, site, 1024)
    assert set(await browser.evaluate(ROWS)) == {1}
    overflowing = await browser.evaluate("[...document.querySelectorAll('.chart-grid > *')].filter(c => "
                                         "c.getBoundingClientRect().right > document.documentElement.clientWidth)"
                                         ".map(c => c.id)")
    assert overflowing == []
    await browser.window(1280)
