"""The viewer's charts (orchestrator/view/charts.py) read as SVG: each line has a dash pattern and a
marker shape of its own beside its colour, and its legend entry shows all three; data with a single
x is a table, never a chart of one dot per line, on the overview of a store with a single-turn task
set (written by the sweep's own writer) as well."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

from orchestrator.view import charts
from tests.stores import dialogue_record, write_episodes
from tests.unit.test_view import current_overview, viewer

SVG = "{http://www.w3.org/2000/svg}"
SERIES = [(f"model-{i} / strategy", [0.25, 0.5, 0.5, 1.0]) for i in range(6)]  # six lines on top of each other


def drawn(svg: str) -> dict[str, tuple[str | None, str | None, set[str | None]]]:
    """Per series of a line chart: its line's dash pattern and colour, and its markers' shapes."""
    root = ET.fromstring(svg)
    shapes = {g.get("data-series"): {m.get("data-marker") for m in g.iter(f"{SVG}path")}
              for g in root.iter(f"{SVG}g") if g.get("class") == "series"}
    return {line.get("data-series", ""): (line.get("stroke-dasharray"), line.get("stroke"),
                                          shapes.get(line.get("data-series"), set()))
            for line in root.iter(f"{SVG}polyline")}


def legend(svg: str) -> dict[str, tuple[str | None, str | None, set[str | None]]]:
    """Per legend entry: the dash pattern and colour of its sample line, and its marker's shape."""
    found = {}
    for key in ET.fromstring(svg).iter(f"{SVG}g"):
        if key.get("class") == "key":
            line = key.find(f"{SVG}line")
            assert line is not None
            shapes = {m.get("data-marker") for m in key.iter(f"{SVG}path")}
            found[key.get("data-series", "")] = (line.get("stroke-dasharray"), line.get("stroke"), shapes)
    return found


def test_each_line_has_its_own_dash_and_marker_and_its_legend_entry_shows_both():
    svg = charts.lines("overlapping", "turn t", SERIES, "chart-test")
    lines = drawn(svg)
    assert sorted(lines) == [label for label, _ in SERIES]
    dashes = [lines[label][0] for label, _ in SERIES]
    assert len(set(dashes[:4])) == 4  # the next line's differs: solid, dash-dot, dashed, dotted
    assert all(len(shapes) == 1 for _, _, shapes in lines.values())  # one shape per line, at every point
    markers = [next(iter(lines[label][2])) for label, _ in SERIES]
    assert len(set(markers[:5])) == 5
    assert len(set(zip(dashes, markers, strict=True))) == len(SERIES)  # told apart without colour
    assert legend(svg) == lines


def test_a_page_draws_a_line_alike_in_every_chart():
    one = drawn(charts.lines("one", "turn t", SERIES[:2], "chart-a", styles=[4, 1]))
    other = drawn(charts.lines("other", "turn t", SERIES[1::-1], "chart-b", styles=[1, 4]))
    assert one == other
    assert one[SERIES[0][0]][0] == charts.style(4).dash and one[SERIES[0][0]][2] == {charts.style(4).marker}


def test_data_with_a_single_x_is_a_table_of_the_values_not_a_chart():
    shown = charts.lines("starter-sql: mean best reward by turn t", "turn t",
                         [("m / a", [0.25]), ("m / b", [1.0]), ("m / c", [])], "chart-reward-2")
    assert "<svg" not in shown and 'id="chart-reward-2"' in shown
    cells = ET.fromstring(shown).findall(".//tbody/tr")
    assert [[td.text for td in row] for row in cells] == [["m / a", "0.25"], ["m / b", "1"], ["m / c", "–"]]


async def test_the_overview_of_a_single_turn_task_set_lists_its_values_rather_than_drawing_dots(tmp_path: Path):
    records = []
    for task in range(3):
        for strategy in ("react", "try_again"):
            rewards = [0.0, 0.5, 1.0][: 2 + task % 2]
            records.append(dialogue_record(task, rewards, strategy=strategy, task_set="a-multi"))
            one = dialogue_record(task, [float(task == 1)], strategy=strategy, task_set="b-single")
            records.append(dataclasses.replace(one, max_turns=1, status="solved" if task == 1 else "max_turns"))
    await write_episodes(tmp_path / "out", "single", records)
    async with viewer(tmp_path / "out") as (_, client):
        page = await current_overview(client)
    shown = {chart: (element(page, f"chart-{chart}-0"), element(page, f"chart-{chart}-1"))
             for chart in ("reward", "solved", "budget")}
    assert {chart: (multi.tag, single.tag) for chart, (multi, single) in shown.items()} == {
        "reward": (f"{SVG}svg", "figure"), "solved": (f"{SVG}svg", "figure"), "budget": (f"{SVG}svg", "figure")}
    values = {chart: [[td.text for td in row] for row in single.findall(".//tbody/tr")]
              for chart, (_, single) in shown.items()}
    assert values == {"reward": [["openai/sim / react", "0.333"], ["openai/sim / try_again", "0.333"]],
                      "solved": [["openai/sim / react", "1"], ["openai/sim / try_again", "1"]],
                      "budget": [["openai/sim / react", "33%"], ["openai/sim / try_again", "33%"]]}


def element(page: str, element_id: str) -> ET.Element:
    """The element of the page with this id, parsed (a chart's SVG or a figure's table); an empty
    `missing` element when there is none."""
    at = page.find(f'id="{element_id}"')
    if at < 0:
        return ET.Element("missing")
    start = page.rindex("<", 0, at)
    tag = page[start + 1:].split(" ", 1)[0]
    return ET.fromstring(page[start:page.index(f"</{tag}>", start) + len(tag) + 3])
