"""`view` in a real browser: headless Chromium driven over the DevTools protocol.

The protocol is a websocket (aiohttp's client, already a dependency), so no driver binary or
Selenium is needed: the page is loaded, links are clicked with real mouse events at their place
on the screen, and the DOM is read as the user would see it. The stores are written through the
sweep's own store writer, the second test while the page is open. Without Chromium the tests
skip, except under CI=true (scripts/ensure-chromium.sh installs it).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from foundation.errors import ConfigError
from foundation.settings import PROJECT_ROOT
from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.browser import test_report_browser
from tests.stores import rows
from tests.unit.test_view import record, viewer, writer

chromium = test_report_browser.chromium  # the fixture: skips without Chromium, fails under CI=true
WAIT_S = 10.0  # a guard against hanging, not a speed target (the live page polls every second)
START_S = 60.0  # Chromium's start on a machine the rest of the suite loads: a guard, not a speed target
EVENTS_KEPT = 2000  # the latest events of the domains a test enabled (Network.enable: each answer's status)


class Browser:
    """One page of a headless Chromium, over the DevTools protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=EVENTS_KEPT)  # of enabled domains

    @classmethod
    @asynccontextmanager
    async def launch(cls, chromium: str, profile: Path) -> AsyncIterator[Browser]:
        process = await asyncio.create_subprocess_exec(
            chromium, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
            "--window-size=1280,900", f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        try:
            port = await _devtools_port(profile / "DevToolsActivePort")
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as answer:
                    target = next(t for t in await answer.json() if t["type"] == "page")
                async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                    browser = cls(ws)
                    try:
                        yield browser
                    finally:
                        await browser.send_only("Browser.close")  # Chromium then ends its renderers itself
        finally:
            try:
                await asyncio.wait_for(process.wait(), WAIT_S)
            finally:
                if process.returncode is None:
                    os.killpg(process.pid, signal.SIGKILL)  # the group we started: browser and renderers
                    await process.wait()

    async def send_only(self, method: str, **params: Any) -> None:
        self.next_id += 1
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        await self.send_only(method, **params)
        while True:
            message = json.loads((await self.ws.receive()).data)
            if "method" in message:
                self.events.append(message)
            if message.get("id") == self.next_id:
                if "navigated or closed" in message.get("error", {}).get("message", ""):
                    raise Navigated(message["error"]["message"])  # the page changed under the command
                assert "error" not in message, message["error"]
                return message["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def wait_for(self, expression: str) -> Any:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                value = await self.evaluate(expression)
            except Navigated:  # a click's or a live update's navigation was under way: ask the new page
                value = None
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"not true within {WAIT_S} s: {expression}")

    async def open(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    async def click(self, selector: str) -> None:
        """A real left click at the middle of the element, then wait for the page it opens."""
        before = await self.evaluate("location.href")
        await self.click_only(selector)
        await self.wait_for(f"location.href !== {json.dumps(before)} && document.readyState === 'complete'")

    async def click_only(self, selector: str) -> None:
        """A real left click at the middle of the element (which opens no page: a header, a box)."""
        x, y = await self.wait_for(f"""(() => {{
            const el = document.querySelector({json.dumps(selector)});
            if (!el) return null;
            el.scrollIntoView({{block: "center"}});
            const r = el.getBoundingClientRect();
            return [r.x + r.width / 2, r.y + r.height / 2];
        }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def text(self, selector: str) -> str:
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? ''")

    async def window(self, width: int, height: int = 900) -> None:
        """Lay the page out as in a window `width` CSS pixels wide (the next load, and this one)."""
        await self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                        mobile=False)

    async def screenshot(self, path: Path, top: int = 0, height: int | None = None) -> Path:
        """The page as a PNG at `path`, from `top` down `height` CSS pixels (all of it by default),
        for a person to look at (the tests read the DOM)."""
        width, full = await self.evaluate("[Math.max(innerWidth, document.documentElement.scrollWidth), document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": top, "width": width, "height": min(height or full, full - top), "scale": 1}
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def key(self, key: str) -> None:
        """A real key press (keydown and keyup) of one printable key or Enter."""
        text = "\r" if key == "Enter" else key
        for kind in ("keyDown", "keyUp"):
            await self.send("Input.dispatchKeyEvent", type=kind, key=key, text=text if kind == "keyDown" else "",
                            code=f"Key{key.upper()}" if len(key) == 1 else key,
                            windowsVirtualKeyCode=13 if key == "Enter" else ord(key.upper()))

    async def search(self, text: str) -> None:
        """Type `text` into the top search box of the open page, as a user would, press Enter, and
        wait for the search page to load."""
        await self.click_only("nav.top input[name=text]")
        await self.send("Input.insertText", text=text)
        await self.key("Enter")
        await self.wait_for("location.pathname === '/search' && document.readyState === 'complete'")


class Navigated(Exception):
    """Chromium answered that the page a command was for navigated away meanwhile."""


async def _devtools_port(path: Path) -> int:
    """The port Chromium chose, from the file it writes once it listens."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return int(path.read_text().split()[0])
        await asyncio.sleep(0.05)
    raise AssertionError("Chromium did not start its DevTools server")


async def test_from_the_overview_to_a_failed_episodes_turns(chromium, tmp_path):
    out = tmp_path / "store"
    async with writer(out) as (store, run):
        for task in range(3):
            await store.add_episode(run, "written", record(task, "solved it", [1.0], status="solved"))
        await store.add_episode(run, "written", record(7, "<script>document.title='owned'</script>", [0.0, 0.25, 0.5],
                                                       status="model_error", failure="model",
                                                       error="the provider failed after 3 attempts"))
    async with viewer(out) as (base, _), Browser.launch(chromium, tmp_path / "profile") as browser:
        await browser.open(f"{base}/s/0")
        assert await browser.text("#episode-count") == "4"
        await browser.click("#progress tbody tr td:nth-child(6) a")  # the cell's unsolved episodes
        assert await browser.text("#match-count") == "1"
        await browser.click("#episodes a.episode")
        turns = await browser.wait_for("document.querySelectorAll('section.turn').length")
        assert turns == 3
        outputs = await browser.evaluate("[...document.querySelectorAll('pre.output')].map(p => p.textContent)")
        assert outputs == [f"<script>document.title='owned'</script> (turn {i})" for i in (1, 2, 3)]
        assert await browser.evaluate("document.title") == "episode 4"  # the stored script never ran
        assert await browser.text("#turn-3 h3") == "Turn 3 · reward after it: 0.500"
        assert await browser.text("#error") == "the provider failed after 3 attempts"
        assert "model_error" in await browser.text("#summary")


async def test_the_open_pages_show_episodes_as_the_sweep_stores_them(chromium, tmp_path):
    out = tmp_path / "store"
    async with writer(out) as (store, run), viewer(out) as (base, _):
        await store.add_episode(run, "written", record(0, "first", [0.0]))
        async with Browser.launch(chromium, tmp_path / "profile") as browser:
            await browser.open(f"{base}/s/0")
            assert await browser.text("#episode-count") == "1"
            seen = []
            for n in (2, 3):
                await store.add_episode(run, "written", record(n, "more", [1.0], status="solved"))
                stored = time.monotonic()
                await browser.wait_for(f"document.querySelector('#episode-count').textContent === '{n}'")
                seen.append(time.monotonic() - stored)
            assert await browser.text("#progress tbody tr td:nth-child(5)") == "2"  # solved, per cell
            await browser.open(f"{base}/s/0/episodes")
            await store.add_episode(run, "written", record(4, "newest", [0.0]))
            stored = time.monotonic()
            await browser.wait_for("document.querySelector('#episodes tbody tr td:nth-child(2) a.task')"
                                   ".textContent === 'starter-bash/4'")
            seen.append(time.monotonic() - stored)
            assert await browser.text("#match-count") == "4"
    print(f"live update seen after {', '.join(f'{s:.2f}' for s in seen)} s")


RUNNING_SWEEP = """name = "watched"
strategies = ["single"]
concurrency = 1
[[models]]
name = "openai/slow-sim"
local = { latency = 1.0, solve_rate = 0.6, seed = 5 }
[[tasks]]
dataset = "starter-bash"
"""


async def _opened_when_created(outdir: Path) -> Source:
    """The store as soon as the sweep has made it (a viewer started earlier says "no results.db")."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            return Source.open(0, outdir)
        except ConfigError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"the sweep made no store in {outdir}")


@pytest.mark.docker
@pytest.mark.slow
async def test_a_running_sweeps_overview_counts_its_episodes(chromium, tmp_path):
    path, out = tmp_path / "watched.toml", tmp_path / "out"
    path.write_text(RUNNING_SWEEP)
    sweep = await asyncio.create_subprocess_exec(sys.executable, "-m", "orchestrator", "sweep", str(path), "--output",
                                                 str(out), "--quiet", cwd=PROJECT_ROOT,
                                                 stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        source = await _opened_when_created(out)
        async with serving([source], "127.0.0.1", 0) as base, Browser.launch(chromium, tmp_path / "p") as browser:
            await browser.open(f"{base}/s/0")
            seen = []
            while sweep.returncode is None:
                seen.append(await browser.text("#episode-count"))
                await asyncio.sleep(0.1)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(sweep.wait(), 0.01)
            await browser.wait_for("document.querySelector('#run-status')?.textContent === 'finished'")
            final = await browser.text("#episode-count")
            assert await browser.text("#planned") == "5"
    finally:
        if sweep.returncode is None:
            sweep.terminate()
        err = (await sweep.communicate())[1].decode()
    assert sweep.returncode == 0, err[-2000:]
    assert final == "5" == str(rows(out, "SELECT count(*) FROM episodes")[0][0])  # the writer was never blocked
    counts = sorted({int(n) for n in seen if n})
    assert len([n for n in counts if 0 < n < 5]) >= 2, f"the page showed only {counts} while the sweep ran"
