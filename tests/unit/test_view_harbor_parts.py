"""`view OUTDIR` over HTTP on Harbor episodes written by the sweep's own writer: the overview's mean of
each reward key (the report's), the failure class `network` in its tables and filters, and an
episode's page with a multi-step task's steps and the files it kept as tables of their own."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from tests.stores import rows, transcript_store
from tests.unit.test_reward_keys_report import SET, harbor_records
from tests.unit.test_view import current_overview, get, tasks, viewer


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return transcript_store(tmp_path / "out", "harbor-parts", harbor_records())


def table_cells(page: str, table_id: str) -> tuple[list[str], list[list[str]]]:
    """The header and the body rows of the table `table_id` as text (cells may span lines)."""
    found = page.split(f'<table id="{table_id}"', 1)[1].split("</table>", 1)[0]

    def text(cell: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", cell))
    head = [text(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", found, re.S)]
    body = found.split("<tbody>", 1)[1]
    return head, [[text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                  for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


async def test_the_overview_shows_the_mean_of_each_reward_key_and_network_failures(store):
    async with viewer(store) as (_, client):
        page = await current_overview(client)
    head, keyed = table_cells(page, "reward-keys")
    assert head == ["model", "strategy", "task set", "scored episodes", "reward", "correctness", "performance"]
    assert keyed == [["oracle", "single", SET, "3", "0.33", "0.67", "0.17"]]
    head, cells = table_cells(page, "cells")
    assert head[11] == "errors: model / task / infra / verifier / agent / network"
    assert cells[0][11] == "1 / 0 / 1 / 1 / 1 / 1" and cells[0][3] == "5"  # the network's episode is in no rate
    assert "network" in table_cells(page, "progress")[0][6]


async def test_episodes_are_listed_by_the_network_class_and_the_offline_status(store):
    async with viewer(store) as (_, client):
        by_class = await get(client, "/s/0/episodes?failure=network")
        by_status = await get(client, "/s/0/episodes?status=verifier_offline")
        bad = await get(client, "/s/0/episodes?failure=offline", 400)
    assert tasks(by_class) == tasks(by_status) == [f"{SET}/4"]
    assert '<option value="network" selected>' in by_class and "network" in bad


async def test_an_episodes_page_shows_steps_and_artifacts_as_tables_and_keeps_the_numbers(store):
    (number,) = rows(store, "SELECT id FROM episodes WHERE task_id = ?", (f"{SET}/0",))[0]
    async with viewer(store) as (_, client):
        page = await get(client, f"/s/0/episodes/{number}")
    assert table_cells(page, "breakdown-2")[1] == [["correctness", "1"], ["performance", "0.5"]]
    assert table_cells(page, "breakdown-1")[1] == [["/app/scratch", "1"]]  # the shell turn's own
    head, steps = table_cells(page, "steps-2")
    assert head == ["name", "reward", "correctness", "verifier_exit", "stopped"]
    assert steps == [["step-1", "1", "1", "0", "no"], ["step-2", "0", "—", "1", "yes"]]
    head, files = table_cells(page, "artifacts-2")
    assert head == ["path", "step", "size", "text"]
    assert [f[:3] for f in files] == [["/app/out.txt", "step-1", "23 bytes"], ["/app/model.bin", "—", "4,096 bytes"]]
    assert files[0][3] == "25 characters<b>made</b> by the agent\n" and "binary" in files[1][3]
    assert "<b>made</b>" not in page and "<pre>&lt;b&gt;made&lt;/b&gt; by the agent\n</pre></details>" in page
    assert "&quot;step-1&quot;" not in page  # no list left as a line of JSON
