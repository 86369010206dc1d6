"""The browser tier's shared fixtures: Chromium, and one browser for each of the viewer's modules."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.browser.test_report_browser import chromium  # noqa: F401 — the fixture
from tests.browser.test_view_browser import Browser


@pytest.fixture(scope="module")
async def browser(chromium: str) -> AsyncIterator[Browser]:  # noqa: F811
    """A headless Chromium of the module's own, with a profile of its own."""
    async with Browser.launch(chromium, Path(tempfile.mkdtemp(prefix="view-browser-"))) as opened:
        yield opened
