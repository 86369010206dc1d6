"""The rough edges of issue 37 in a real browser (headless Chromium over the DevTools protocol, as in
test_view_browser.py): no request the browser makes of a page is answered with an error (the icon it
asks for included), a model is chosen from the store's in the list's filters, and a traceback pasted
into the search box is one line of the viewer's saying to shorten it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.browser.test_view_browser import Browser
from tests.stores import dialogue_record, write_episodes

MODELS = ("openai/local-sim", "openai/sim")
TRACEBACK = " ".join(f'File "/work/app/module_{i}.py", line {i}, in handler_{i} raise ValueError(x)'
                     for i in range(130)) + " ValueError: the last line"  # over 8,190 bytes in an address


@pytest.fixture(scope="module")
async def site(tmp_path_factory) -> AsyncIterator[str]:
    out = tmp_path_factory.mktemp("edges") / "out"
    await write_episodes(out, "edges", [dialogue_record(t, [0.0, 1.0 if t % 2 else 0.5], model=MODELS[t % 2],
                                                        status="solved" if t % 2 else "max_turns") for t in range(6)])
    async with serving([Source.open(0, out)], "127.0.0.1", 0) as base:
        yield base


def answers(browser: Browser) -> list[tuple[str, int]]:
    """(address, status) of every answer the browser received since Network.enable."""
    return [(e["params"]["response"]["url"], e["params"]["response"]["status"]) for e in browser.events
            if e["method"] == "Network.responseReceived"]


async def settled(browser: Browser, path: str) -> list[tuple[str, int]]:
    """The answers to opening `path` (its icon, asked for after the page has loaded, included)."""
    browser.events.clear()
    await browser.open(path)
    for _ in range(5):  # half a second for the requests that follow the load, their events read meanwhile
        await asyncio.sleep(0.1)
        await browser.evaluate("1")
    return answers(browser)


async def test_no_request_of_a_page_is_answered_with_an_error_the_icon_included(site, browser):
    await browser.send("Network.enable")
    try:
        seen = []
        for path in ("/s/0", "/s/0/episodes", "/s/0/episodes/2", "/s/0/task?task_id=starter-bash/1"):
            seen += await settled(browser, site + path)
            assert [(url, status) for url, status in seen if status >= 400] == [], path
    finally:
        await browser.send("Network.disable")
    assert (f"{site}/favicon.ico", 200) in seen  # asked for once, then kept


async def test_a_model_is_chosen_from_the_stores_in_the_lists_filters(site, browser):
    await browser.open(f"{site}/s/0/episodes")
    options: list[Any] = await browser.evaluate(
        "[...document.querySelectorAll('form.filters select[name=model] option')].map(o => o.value)")
    assert options == ["", *MODELS]
    await browser.evaluate("document.querySelector('form.filters select[name=model]').value = 'openai/local-sim'")
    await browser.click("form.filters button[type=submit]")
    assert await browser.text("#match-count") == "3"
    assert await browser.evaluate("document.querySelector('select[name=model]').value") == "openai/local-sim"


async def test_a_traceback_pasted_into_the_search_box_is_one_line_saying_to_shorten_it(site, browser):
    await browser.open(f"{site}/s/0")
    await browser.search(TRACEBACK)
    line = await browser.text("#error")
    assert "the search is too long" in line and "shorten it" in line, line
    assert await browser.evaluate("document.querySelectorAll('.bad').length") == 1
