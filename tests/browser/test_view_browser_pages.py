"""The viewer's pages in a real browser (headless Chromium over the DevTools protocol, as in
test_view_browser.py): the layout at 1,024 and 1,440 px, the transcript, finding things (search,
sorting, the task page, j/k and n/p, downloads), two runs side by side, charts, and the defects of
issue 26 (the Host header, numbers out of range, polling after the run). Screenshots of every
page at both widths are written under the test's directory (their paths printed) for a person
to look at; the assertions read the DOM.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.view.app import serving
from orchestrator.view.source import Source
from orchestrator.store import Store
from tests.stores import dialogue_record, write_episodes
from tests.browser.test_view_browser import Browser

WORD = "zanzibar"
OVERFLOWING = """[...document.querySelectorAll('table')].filter(t => {
    const box = t.parentElement;
    return t.getBoundingClientRect().right > document.documentElement.clientWidth + 1
        || box.scrollWidth > box.clientWidth + 1;
}).map(t => t.id)"""


async def runs(root: Path) -> tuple[Path, Path]:
    """Two stores of one sweep name in two directories (a night and the night before): 16 episodes
    each over two strategies, some solved in one and not the other, a word in a few observations."""
    made = []
    for night, shift in (("night-1", 0), ("night-2", 1)):
        records = [dialogue_record(t, [0.0, 0.5, 1.0 if (t + shift) % 3 else 0.25][: 2 + t % 2],
                                   status="solved" if (t + shift) % 3 and t % 2 else "max_turns",
                                   strategy=("try_again", "react")[t // 8], words=WORD if t in (3, 9) else "",
                                   flags="-a " if shift else "")
                   for t in range(16)]
        await write_episodes(root / night / "out", "nightly", records)
        made.append(root / night / "out")
    return made[0], made[1]


@pytest.fixture(scope="module")
async def site(tmp_path_factory) -> AsyncIterator[str]:
    a, b = await runs(tmp_path_factory.mktemp("pages"))
    async with serving([Source.open(0, a), Source.open(1, b)], "127.0.0.1", 0) as base:
        yield base


PAGES = {"overview": "/s/0", "list": "/s/0/episodes", "search-list": f"/s/0/episodes?text={WORD}",
         "episode": "/s/0/episodes/4", "task": "/s/0/task?task_id=starter-bash/3", "compare": "/compare?a=0&b=1",
         "pair": "/compare/pair?a=0&b=1&ea=2&eb=2", "search": f"/search?text={WORD}"}


async def test_no_table_overflows_and_the_task_text_is_readable_at_1024_and_1440_px(site, browser, tmp_path):
    shots = []
    for width in (1024, 1440):
        await browser.window(width)
        for name, path in PAGES.items():
            await browser.open(site + path)
            assert await browser.evaluate(OVERFLOWING) == [], (width, name)
            if name in ("list", "search-list", "task"):
                widths = await browser.evaluate("[...document.querySelectorAll('#episodes td.text')]"
                                                ".map(td => td.getBoundingClientRect().width)")
                assert widths and min(widths) >= 200, (width, name, widths)
            shots.append(await browser.screenshot(tmp_path / f"{name}-{width}.png", 0, 1400))
    await browser.window(1280)
    print("screenshots:", *shots, sep="\n  ")


async def test_the_episode_page_is_the_transcript_with_each_turn_beside_its_answer(site, browser):
    await browser.open(f"{site}/s/0/episodes/4")
    roles = await browser.evaluate("[...document.querySelectorAll('.call .message .role')].map(r => r.textContent)")
    assert roles[:3] == ["system", "user", "call 1: answer · 300 + 25 tokens, 200 ms, $0.0004 · finish reason: stop"]
    assert sum(r.startswith("call ") for r in roles) == 3 == await browser.evaluate(
        "document.querySelectorAll('section.turn').length")
    beside = await browser.evaluate("""[...document.querySelectorAll('.exchange')].map(x => {
        const answer = x.children[0].getBoundingClientRect(), turn = x.children[1].getBoundingClientRect();
        return [Math.abs(answer.top - turn.top) < 2, turn.left > answer.right];
    })""")
    assert beside == [[True, True]] * 3
    assert (await browser.text("#breakdown-3")).split() == ["file_changes0.33", "file_contents0.08", "output_similarity0.1"]
    await browser.click(".turns-nav a[href='#turn-2']")
    assert await browser.evaluate("location.hash") == "#turn-2"


async def test_search_sort_keys_and_neighbours(site, browser):
    await browser.open(f"{site}/s/0")
    await browser.search(WORD)
    assert await browser.evaluate("[...document.querySelectorAll('.store-count')].map(s => s.textContent)") == ["2", "2"]
    assert await browser.evaluate(f"[...document.querySelectorAll('mark')].every(m => m.textContent === '{WORD}')")
    await browser.open(f"{site}/s/0/episodes")
    await browser.click("#episodes th a.sort[href*='sort=reward']")
    rewards = await browser.evaluate("[...document.querySelectorAll('#episodes tbody tr td:nth-child(5)')]"
                                     ".map(td => parseFloat(td.textContent))")
    assert rewards == sorted(rewards, reverse=True)
    ids = await browser.evaluate("[...document.querySelectorAll('#episodes a.episode')].map(a => a.textContent)")
    for key in ("j", "j", "Enter"):
        await browser.key(key)
    await browser.wait_for(f"location.pathname === '/s/0/episodes/{ids[1]}' && document.readyState === 'complete'")
    await browser.key("n")
    await browser.wait_for(f"location.pathname === '/s/0/episodes/{ids[2]}' && document.readyState === 'complete'")
    await browser.key("p")
    await browser.wait_for(f"location.pathname === '/s/0/episodes/{ids[1]}' && document.readyState === 'complete'")


async def test_a_task_page_and_a_download_of_the_list(site, browser):
    await browser.open(f"{site}/s/0/episodes?strategy=react")
    await browser.click("#episodes a.task")
    assert await browser.evaluate("location.pathname") == "/s/0/task"
    assert await browser.evaluate("document.querySelectorAll('#task-grid tbody tr').length") == 1
    assert "nightly (night-2/out)" in await browser.text("main, body")  # the same task in the other store
    csv_text = await browser.evaluate("fetch(document.querySelector('a.download').href).then(r => r.text())")
    header, *rows = csv_text.strip().splitlines()
    assert header.startswith("id,model,strategy") and len(rows) == 1
    listed = json.loads(await browser.evaluate("fetch('/s/0/episodes?strategy=react&format=json').then(r => r.text())"))
    assert {e["strategy"] for e in listed} == {"react"} and len(listed) == 8


async def test_two_runs_side_by_side_aligned_with_the_next_flipped_task(site, browser):
    await browser.open(f"{site}/compare?a=0&b=1&flipped=1")
    assert "nightly (night-1/out) → nightly (night-2/out)" in await browser.text("h1")
    flipped = int(await browser.text("#flipped-count"))
    assert flipped >= 2
    await browser.click("#pairs a.pair-link")
    assert await browser.evaluate("document.querySelectorAll('#aligned .side-a').length") >= 2
    assert await browser.evaluate("document.querySelectorAll('#aligned ins.diff, #aligned del.diff').length") > 0
    first = await browser.evaluate("location.search")
    await browser.key("n")
    await browser.wait_for(f"location.search !== {json.dumps(first)} && document.readyState === 'complete'")
    assert await browser.evaluate("document.querySelector('a[rel=prev]') !== null")


async def test_the_overview_sorts_in_the_page_and_draws_its_charts(site, browser):
    await browser.open(f"{site}/s/0")
    await browser.wait_for("document.querySelector('#chart-tokens') !== null")
    assert await browser.evaluate("document.querySelectorAll('#chart-tokens rect.bar').length") == 2
    assert await browser.evaluate("document.querySelectorAll('#chart-reward-0 polyline').length") == 2
    assert await browser.evaluate("document.querySelectorAll('script:not([src]), style').length") == 0
    await browser.click_only("#cells th:nth-child(7)")  # mean reward: the viewer's own script sorts it
    values = await browser.evaluate("[...document.querySelectorAll('#cells tbody td:nth-child(7)')]"
                                    ".map(td => parseFloat(td.textContent))")
    assert values == sorted(values) and await browser.evaluate(
        "document.querySelector('#cells th:nth-child(7)').getAttribute('aria-sort')") == "ascending"


async def test_a_foreign_host_and_numbers_out_of_range_are_one_line(site, browser):
    port = site.rsplit(":", 1)[1]
    await browser.open(f"http://rebinding.localhost:{port}/s/0")  # Chromium sends that name as the Host
    assert "answers to its own address only" in await browser.text("#error")
    for path, line in (("/s/0/episodes/99999999999999999999999", "no episode"),
                       ("/s/0/episodes?page=99999999999999999999999999", "page must be a whole number"),
                       ("/s/0/episodes?page=999999", "past the last page"),
                       ("/s/0/episodes?min_reward=nan", "must be a finite number")):
        await browser.open(site + path)
        assert line in await browser.text("#error"), path


async def test_an_open_page_stops_polling_when_the_run_has_finished(browser, tmp_path):
    out = tmp_path / "running"
    polls = "performance.getEntriesByType('resource').filter(e => e.name.includes('/token')).length"
    async with Store.open(out, sweep="running", identity="running-id") as store:
        run = await store.start_run(sweep="running", identity="running-id", sweep_hash="0" * 64, git_sha=None,
                                    config_json="{}")
        await store.add_episode(run, "running", dialogue_record(0, [0.0]))
        async with serving([Source.open(0, out)], "127.0.0.1", 0) as base:
            await browser.open(f"{base}/s/0")
            await browser.wait_for(f"{polls} >= 1")  # the run is going: the page polls
            await store.finish_run(run, "finished")
            await browser.wait_for("document.querySelector('#run-status').textContent === 'finished'")
            after = await settled(browser, polls)  # the statistics of its last state drawn, it stops
            await asyncio.sleep(2.5)
            assert await browser.evaluate(polls) == after  # finished: no more polling
            await browser.open(f"{base}/s/0/episodes")
            await asyncio.sleep(1.5)
            assert await browser.evaluate(polls) == 0


async def settled(browser: Browser, count: str) -> int:
    """The value of `count` once it stays the same for 1.5 s (the page's last swap may be a tick behind)."""
    now = await browser.evaluate(count)
    for _ in range(6):
        await asyncio.sleep(1.5)
        now, before = await browser.evaluate(count), now
        if now == before:
            return now
    raise AssertionError(f"{count} kept changing")
