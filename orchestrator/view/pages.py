"""The pages of one store: the overview (progress, the report's cells and plots), an episode list, an episode.

Numbers come from the report's own view (orchestrator/report/view.py) and plots from its SVG
module, so the viewer and report.html always agree.
"""

from __future__ import annotations

from orchestrator.report.summary import CellSummary
from orchestrator.report.svg import Bar, bar_chart, line_chart
from orchestrator.report.view import CELL_COLUMNS, ReportView, cell_row, cut_text, paper_cell, pct
from orchestrator.view.layout import esc, folded, link, money, pager, table, url, when
from orchestrator.view.queries import (
    FAILURE_CLASSES,
    SORTS,
    STATUSES,
    CellProgress,
    EpisodeDetail,
    EpisodeFilter,
    EpisodePage,
)
from orchestrator.view.source import Overview, Source

TEXT_PREVIEW = 140  # characters of a task's query in a list


def cell_link(source: Source, cell: tuple[str, str, str], text: object, **more: str) -> str:
    model, strategy, task_set = cell
    return link(url(f"/s/{source.index}/episodes", {"model": model, "strategy": strategy, "task_set": task_set,
                                                     **more}), text)


def overview(source: Source, now: Overview) -> str:
    view, progress = now.snapshot.view, now.progress
    results = view.results
    stored = sum(p.episodes for p in progress)
    last_run = results.runs[-1] if results.runs else None
    run_text = (f"run {last_run.id} <span id=\"run-status\">{esc(last_run.status)}</span> since "
                f"{when(last_run.started_at)} UTC on {esc(last_run.host)}" if last_run else "no run recorded")
    parts = [f"<h1>Sweep {esc(results.sweep)}</h1>",
             f"<p><code>{esc(source.path)}</code> · <span id=\"episode-count\">{stored}</span>{_of_planned(now)} "
             "episodes stored"
             f"{esc(cut_text(view.cut_by_budget))} · overall success {pct(view.overall_success)} · {run_text} · "
             f"{link(f'/s/{source.index}/episodes', 'all episodes')}</p>",
             "<h2>Progress per cell</h2>", _progress_table(source, progress)]
    if not now.current:
        parts.append(f'<p class="warn" id="behind">The statistics below are of {len(results.episodes)} '
                     "episodes: those stored since are being added (a page that is open updates itself).</p>")
    if view.summaries:
        parts += _report(source, view)
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
        rows.append([esc(p.model), esc(p.strategy), esc(p.task_set),
                     f'<span class="stored">{cell_link(source, cell, p.episodes)}</span>', str(p.successes),
                     cell_link(source, cell, unsolved, success="no", sort="reward-asc") if unsolved else "0",
                     cell_link(source, cell, p.failures, failure="any") if p.failures else "0", str(p.cut),
                     when(p.last_finished)])
    return table(("model", "strategy", "task set", "stored", "solved", "unsolved", "failed (model, task, infra)",
                  "cut by budget", "last stored (UTC)"), rows, "progress", names=3)


def _report(source: Source, view: ReportView) -> list[str]:
    rows = []
    for s in view.summaries:
        cells = [esc(c) for c in cell_row(s)]
        cells[3] = cell_link(source, (s.model, s.strategy, s.task_set), s.episodes)
        rows.append(cells)
    paper = view.table
    paper_rows = [[esc(m), esc(s), *(esc(paper_cell(paper.get((m, s), ts))) for ts in paper.task_sets)]
                  for m, s in paper.rows]
    parts = ["<h2>Per model × strategy × task set</h2>",
             "<p>Success with its 95% Wilson interval, as in the report.</p>",
             table(CELL_COLUMNS, rows, "cells", names=3),
             "<h2>Success rate by task set</h2>", "<p>Success rate (mean reward).</p>",
             table(["model", "strategy", *paper.task_sets], paper_rows, "paper-table", names=2),
             "<h2>Success within a turn budget</h2>"]
    parts += [line_chart(f"{task_set}: solved within t turns", "turn budget t", curves)
              for task_set, curves in view.curves.items()]
    parts.append("<h2>Success rate per model</h2>")
    parts += [_bar_chart(model, [s for s in view.summaries if s.model == model])
              for model in sorted({s.model for s in view.summaries})]
    return parts


def _bar_chart(model: str, mine: list[CellSummary]) -> str:
    bars = {(s.task_set, s.strategy): Bar(s.success_rate, s.ci_low, s.ci_high)
            for s in mine if s.success_rate is not None}
    return bar_chart(f"{model}: success rate", sorted({s.task_set for s in mine}), sorted({s.strategy for s in mine}),
                     bars)


def filter_form(source: Source, flt: EpisodeFilter) -> str:
    def select(name: str, options: tuple[str, ...], current: str, blank: str) -> str:
        items = "".join(f'<option value="{esc(o)}"{" selected" if o == current else ""}>{esc(o or blank)}</option>'
                        for o in options)
        return f'<label>{esc(name)}<select name="{name}">{items}</select></label>'

    def box(name: str, value: str, size: int = 14) -> str:
        return f'<label>{esc(name.replace("_", " "))}<input name="{name}" value="{esc(value)}" size="{size}"></label>'

    return (f'<form class="filters" method="get" action="/s/{source.index}/episodes">'
            + box("model", flt.model) + box("strategy", flt.strategy, 10) + box("task_set", flt.task_set, 12)
            + select("status", ("", *STATUSES), flt.status, "any")
            + select("success", ("", "yes", "no"), flt.success, "any")
            + select("failure", ("", *FAILURE_CLASSES), flt.failure, "")
            + box("min_reward", flt.min_reward, 4) + box("max_reward", flt.max_reward, 4) + box("text", flt.text)
            + select("sort", tuple(SORTS), flt.sort, "")
            + '<button type="submit">show</button></form>')


def episode_list(source: Source, flt: EpisodeFilter, found: EpisodePage) -> str:
    rows = [[link(f"/s/{source.index}/episodes/{r.id}", r.id, class_="episode"), esc(r.task_id), str(r.epoch),
             esc(f"{r.model} / {r.strategy} / {r.task_set}"), _status(r.status), esc(r.failure_class or ""),
             f"{r.reward:.2f}", str(r.n_turns), f"{r.tokens:,}", money(r.cost_usd), when(r.finished_at),
             f'<span class="query">{esc(_preview(r.query))}</span>'] for r in found.rows]
    base = f"/s/{source.index}/episodes"
    return "\n".join([
        f'<p><span id="match-count">{found.total}</span> episodes match.</p>',
        table(("id", "task", "epoch", "cell", "status", "failure", "reward", "turns", "tokens", "cost",
               "finished (UTC)", "query"), rows, "episodes", names=1),
        pager(flt.page, found.pages, lambda n: url(base, flt.params(page=n)))])


def _preview(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= TEXT_PREVIEW else one_line[:TEXT_PREVIEW - 1] + "…"


def _status(status: str) -> str:
    css = "good" if status == "solved" else "bad" if status.endswith("error") or status == "timeout" else ""
    return f'<span class="status {css}">{esc(status)}</span>'


def episode(source: Source, detail: EpisodeDetail) -> str:
    """The whole episode: summary, task and gold, every turn, the LLM calls, lineage."""
    e = detail.fields
    cell = (e["model"], e["strategy"], e["task_set"])
    summary = [["status", _status(e["status"])], ["failure class", esc(e["failure_class"] or "none")],
               ["error", f'<span id="error">{esc(e["error"] or "")}</span>'], ["reward", f"{e['reward']:.3f}"],
               ["success", "yes" if e["success"] else "no"], ["turns", f"{e['n_turns']} of {e['max_turns']}"],
               ["tokens", f"{e['prompt_tokens']:,} prompt + {e['completion_tokens']:,} completion"],
               ["cost", money(e["cost_usd"]) + (f" + {e['unpriced_calls']} unpriced calls" if e["unpriced_calls"]
                                                else "")],
               ["attempts", str(e["attempts"])],
               ["time", f"{when(e['started_at'])} – {when(e['finished_at'])} UTC "
                        f"({e['finished_at'] - e['started_at']:.2f} s)"]]
    parts = [f"<h1>{esc(e['task_id'])} · epoch {e['epoch']}</h1>",
             f"<p>{cell_link(source, cell, ' / '.join(cell))} · sweep {esc(e['sweep'])}</p>",
             table(None, summary, "summary", names=2),
             "<h2>Task</h2>", folded(e["query"], "query"), folded(e["gold"], "gold"),
             f"<h2>Turns ({len(detail.turns)})</h2>", *_turns(detail),
             f"<h2>LLM calls ({len(detail.calls)})</h2>", _calls(detail),
             "<h2>Lineage</h2>", _lineage(detail)]
    return "\n".join(parts)


def _turns(detail: EpisodeDetail) -> list[str]:
    if not detail.turns:
        return ['<p class="muted">No turn was taken.</p>']
    return [f'<section class="turn" id="turn-{i + 1}"><h3>Turn {i + 1} · reward after it: {t.reward:.3f}'
            f'{"" if t.executed else " · not executed"}</h3>'
            + folded(t.output, "model output", "output") + folded(t.action, "action", "action")
            + folded(t.observation, "observation", "observation") + "</section>"
            for i, t in enumerate(detail.turns)]


def _calls(detail: EpisodeDetail) -> str:
    if not detail.calls:
        return '<p class="muted">No LLM call (an offline model, or none succeeded).</p>'
    rows = [[str(i + 1), esc(c.model), esc(c.served_model or "—"), f"{c.prompt_tokens:,}", f"{c.completion_tokens:,}",
             f"{c.latency_s * 1000:.0f} ms", str(c.attempts), money(c.cost_usd)] for i, c in enumerate(detail.calls)]
    return table(("call", "model", "served as", "prompt tokens", "completion tokens", "latency", "attempts", "cost"),
                 rows, "calls", names=3)


def _lineage(detail: EpisodeDetail) -> str:
    e, run = detail.fields, detail.run
    rows = [["image", esc(e["image"])], ["image digest", esc(e["image_digest"] or "(unknown)")],
            ["model as served", esc(e["served_model"] or "(not reported)")], ["environment", esc(e["env"])],
            ["dataset", f"{esc(e['dataset'])} #{e['task_index']}"], ["run", f"{run.get('id', '—')} ({esc(run.get('status'))})"],
            ["host", esc(e.get("host") or run.get("host") or "—")], ["sweep ran on", esc(run.get("host") or "—")],
            ["git sha", esc(run.get("git_sha") or "—")],
            ["sweep file sha256", esc(run.get("sweep_hash") or "—")]]
    return table(None, rows, "lineage", names=2)
