"""The pages of one store: the overview (progress, the report's cells, charts) and an episode list.

Numbers come from the report's own content (orchestrator/report/content.py) and plots from its SVG
module, so the viewer and report.html always agree; the viewer's own charts are charts.py's.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.report.summary import FAILURE_CLASSES, CellSummary
from orchestrator.report.svg import Bar
from orchestrator.report.content import (
    KEYS_NOTE,
    ReportContent,
    ci_text,
    cost_text,
    cut_text,
    num,
    paper_cell,
    pct,
    reward_key_table,
)
from orchestrator.store.chart_data import CellCharts, CellNumbers
from orchestrator.store.episode_query import CellProgress, EpisodeFilter, EpisodePage
from orchestrator.view import charts as ch
from orchestrator.view.layout import esc, link, money, name, pager, plural, table, url, when
from orchestrator.view.lists import FORMATS, list_table
from orchestrator.view.source import Overview, Source

CELL_HEAD = ("model", "strategy", "task set", "episodes", "success", "95% CI", "mean reward", "mean turns", "tokens",
             "tokens / episode", "cost", f"errors: {' / '.join(FAILURE_CLASSES)}", "cut by budget")


def cell_link(source: Source, cell: tuple[str, str, str], text: object, **more: str) -> str:
    model, strategy, task_set = cell
    return link(url(f"/s/{source.index}/episodes", {"model": model, "strategy": strategy, "task_set": task_set,
                                                     **more}), text)


def overview(source: Source, now: Overview) -> str:
    view, progress = now.snapshot.view, now.progress
    results = view.results
    stored = sum(p.episodes for p in progress)
    noun = "episodes" if now.planned else plural(stored, "episode")  # "3 of 5 planned episodes", "1 episode"
    last_run = results.runs[-1] if results.runs else None
    run_text = (f"run {last_run.id} <span id=\"run-status\">{esc(last_run.status)}</span> since "
                f"{when(last_run.started_at)} UTC on {esc(last_run.host)}" if last_run else "no run recorded")
    parts = [f"<h1>Sweep {esc(source.label)}</h1>",
             f"<p><code>{esc(source.path)}</code> · <span id=\"episode-count\">{stored}</span>{_of_planned(now)} "
             f"{noun} stored{esc(cut_text(view.cut_by_budget))} · overall success {pct(view.overall_success)} · "
             f"{run_text} · {link(f'/s/{source.index}/episodes', 'all episodes')}</p>",
             "<h2>Progress per cell</h2>", _progress_table(source, progress)]
    if now.snapshot.token != now.token:
        parts.append(f'<p class="warn" id="behind">The statistics below are of {len(results.episodes)} '
                     "episodes: those stored since are being added (a page that is open updates itself).</p>")
    if view.summaries:
        charts = now.snapshot.charts
        parts += _report(source, view) + (_charts(charts, view) if charts is not None else [
            '<p class="muted" id="charts-pending">The charts are being drawn from every turn and LLM call; '
            "this page shows them when they are ready.</p>"])
    return "\n".join(parts)


def _of_planned(now: Overview) -> str:
    """" of N planned (x%)" when the sweep's log says how many its latest run planned."""
    if not now.planned:
        return ""
    stored = sum(p.episodes for p in now.progress)
    return f' of <span id="planned">{now.planned}</span> planned ({pct(stored / now.planned)})'


def _progress_table(source: Source, progress: list[CellProgress]) -> str:
    rows = []
    for p in progress:
        cell = (p.model, p.strategy, p.task_set)
        unsolved = p.episodes - p.successes  # what the link lists: cut episodes included (they are not solved)
        rows.append([name(p.model), name(p.strategy), name(p.task_set),
                     f'<span class="stored">{cell_link(source, cell, p.episodes)}</span>', str(p.successes),
                     cell_link(source, cell, unsolved, success="no", sort="reward-asc") if unsolved else "0",
                     cell_link(source, cell, p.failures, failure="any") if p.failures else "0", str(p.cut),
                     f'<span class="when">{when(p.last_finished)}</span>'])
    return table(("model", "strategy", "task set", "stored", "solved", "unsolved",
                  f"with an error ({', '.join(FAILURE_CLASSES)})", "cut by budget", "last stored (UTC)"), rows,
                 "progress", names=3, css="sortable keys")


def _cell_row(source: Source, s: CellSummary) -> list[str]:
    errors = " / ".join(str(s.failures[k]) for k in FAILURE_CLASSES)
    return [name(s.model), name(s.strategy), name(s.task_set),
            cell_link(source, (s.model, s.strategy, s.task_set), s.episodes),
            esc(f"{pct(s.success_rate)} ({s.successes})"), esc(ci_text(s)), num(s.mean_reward), num(s.mean_turns, 1),
            f"{s.total_tokens:,}", num(s.mean_tokens, 0), esc(cost_text(s)), errors, str(s.cut)]


def _report(source: Source, view: ReportContent) -> list[str]:
    paper = view.table
    paper_rows = [[name(m), name(s), *(esc(paper_cell(paper.get((m, s), ts))) for ts in paper.task_sets)]
                  for m, s in paper.rows]
    return ["<h2>Per model × strategy × task set</h2>",
            "<p>Success with its 95% Wilson interval, as in the report. Click a column's header to sort by it.</p>",
            table(CELL_HEAD, [_cell_row(source, s) for s in view.summaries], "cells", names=3, css="sortable keys"),
            *_key_means(view), "<h2>Success rate by task set</h2>", "<p>Success rate (mean reward).</p>",
            table(["model", "strategy", *paper.task_sets], paper_rows, "paper-table", names=2, css="sortable")]


def _key_means(view: ReportContent) -> list[str]:
    """The report's mean of each reward key per cell, where a Harbor verifier gave keys besides `reward`."""
    header, rows = reward_key_table(view.summaries)
    if not rows:
        return []
    shown = [[*(name(c) for c in row[:3]), *(esc(c) for c in row[3:])] for row in rows]
    return ["<h2>Mean of each reward key</h2>", f"<p>{esc(KEYS_NOTE)}</p>",
            table(header, shown, "reward-keys", names=3, css="sortable")]


def _charts(charts: CellCharts, view: ReportContent) -> list[str]:
    """The charts in grids that put two or three in a row on a wide window; a line is drawn alike
    (colour, dash, marker) in every chart of the page."""
    cells = sorted(charts.cells)
    looks = {f"{m} / {s}": i for i, (m, s) in enumerate(sorted({c[:2] for c in cells}))}
    by_set = sorted({c[2] for c in cells})

    def styles(series: list[tuple[str, list[float]]]) -> list[int]:
        return [looks.get(label, len(looks) + k) for k, (label, _) in enumerate(series)]
    reward, solved = [], []
    for i, ts in enumerate(by_set):
        mine = [c for c in cells if c[2] == ts]
        series = [(f"{c[0]} / {c[1]}", charts.reward_by_turn.get(c, [])) for c in mine]
        reward.append(ch.lines(f"{ts}: mean best reward by turn t", "turn t", series, f"chart-reward-{i}",
                               styles=styles(series)))
        series = [(f"{c[0]} / {c[1]}", _counts(charts.solved_at.get(c, {}))) for c in mine]
        top = max((v for _, values in series for v in values), default=0)
        if top:
            solved.append(ch.lines(f"{ts}: episodes solved at turn t", "turn t", series, f"chart-solved-{i}",
                                   top_value=float(top), counts=True, styles=styles(series)))
    budget = [ch.lines(f"{task_set}: solved within t turns", "turn budget t", curves, f"chart-budget-{i}",
                       percent=True, styles=styles(curves)) for i, (task_set, curves) in enumerate(view.curves.items())]
    per_model = [_bar_chart(model, [s for s in view.summaries if s.model == model], f"chart-model-{i}")
                 for i, model in enumerate(sorted({s.model for s in view.summaries}))]
    return [*_grid("Tokens, cost and latency per cell", "", _cell_bars(charts, cells)),
            *_grid("Reward against turn", "Mean over each cell's episodes of the best reward within the first t turns.",
                   reward),
            *_grid("Turns to success", "Solved episodes by the turn at which they were solved.", solved),
            *_grid("Success within a turn budget", "", budget), *_grid("Success rate per model", "", per_model)]


def _grid(heading: str, note: str, charts: list[str]) -> list[str]:
    return [f"<h2>{esc(heading)}</h2>", *([f"<p>{esc(note)}</p>"] if note else []), '<div class="chart-grid">',
            *charts, "</div>"]


def _cell_bars(charts: CellCharts, cells: list[tuple[str, str, str]]) -> list[str]:
    """Tokens, cost and latency per cell, the cells under a heading per task set."""
    def groups(bar: Callable[[CellNumbers], tuple[float, str] | None]) -> list[tuple[str, list[ch.Measure]]]:
        found = []
        for ts in sorted({c[2] for c in cells}):
            bars = [(f"{c[0]} / {c[1]}", *shown) for c in cells
                    if c[2] == ts and (shown := bar(charts.cells[c])) is not None]
            found += [(ts, bars)] if bars else []
        return found
    parts = [ch.hbars("tokens per episode", groups(lambda v: (v.tokens_per_episode, f"{v.tokens_per_episode:,.0f}")),
                      "chart-tokens"),
             ch.hbars("cost (priced calls)", groups(lambda v: (v.cost_usd or 0.0, money(v.cost_usd))), "chart-cost")]
    timed = groups(lambda v: None if v.latency_p50 is None else
                   (v.latency_p50, f"{v.latency_p50:.2f} s ({v.latency_p95:.2f} s)"))
    if timed:
        parts.append(ch.hbars("LLM call latency, median (p95)", timed, "chart-latency"))
    return parts


def _counts(solved: dict[int, int]) -> list[float]:
    return [float(solved.get(t, 0)) for t in range(1, max(solved, default=0) + 1)]


def _bar_chart(model: str, mine: list[CellSummary], chart_id: str) -> str:
    bars = {(s.task_set, s.strategy): Bar(s.success_rate, s.ci_low, s.ci_high)
            for s in mine if s.success_rate is not None}
    return ch.bars(f"{model}: success rate", sorted({s.task_set for s in mine}), sorted({s.strategy for s in mine}),
                   bars, chart_id)


def episode_list(source: Source, flt: EpisodeFilter, found: EpisodePage, snippets: dict[int, str], note: str) -> str:
    base = f"/s/{source.index}/episodes"
    downloads = " · ".join(link(url(base, flt.params(format=f)), f.upper(), class_="download") for f in FORMATS)
    return "\n".join([
        f'<p class="warn" id="index-note">{esc(note)}</p>' if note else "",
        f'<p><span id="match-count">{found.total}</span> {"episode matches" if found.total == 1 else "episodes match"} · '
        f'download the list as {downloads} · '
        '<span class="keys-help">keys: j/k select, Enter opens, n/p next and previous page</span></p>',
        list_table(source, flt, found.rows, snippets),
        pager(flt.page, found.pages, lambda n: url(base, flt.params(page=n)))])
