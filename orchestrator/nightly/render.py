"""The comparison and nightly reports, as Markdown and as one self-contained HTML page.

The rows are computed once (`comparison_rows`, `flip_rows`) and rendered twice, so the two
formats always agree. HTML reuses the sweep report's table helper and style sheet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

from orchestrator.nightly.compare import CellComparison, Comparison
from orchestrator.nightly.flaky import TaskKey
from orchestrator.nightly.trend import Series, trend_chart
from orchestrator.report.html import STYLE, html_table
from orchestrator.report.markdown import table

COLUMNS = ("model", "strategy", "task set", "pairs", "success before", "success now", "Δ success (pts)",
           "McNemar p", "Δ mean reward [95% CI]", "bootstrap p", "pass→fail", "fail→pass", "verdict")


@dataclass(frozen=True)
class NightlyReport:
    """Everything one night's report shows."""

    sweep: str
    started_at: float
    outdir: str
    status: str  # passed | regression
    baseline: str | None  # "night N (date, outdir)"; None on the first night
    gate_checked: int
    broken: dict[tuple[str, str], str]
    comparison: Comparison | None
    flaky: dict[TaskKey, int]
    flaky_excluded: bool
    nights: list[str] = field(default_factory=list)  # trend x labels, oldest first
    trends: dict[str, list[Series]] = field(default_factory=dict)  # metric -> one series per cell


def when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _p(value: float) -> str:
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _reward(c: CellComparison) -> str:
    if c.reward is None:
        return "—"
    r = c.reward
    return f"{r.difference:+.3f} [{r.low:+.3f}, {r.high:+.3f}]"


def flip_label(task_id: str, epoch: int, epochs: bool) -> str:
    return f"{task_id}#{epoch}" if epochs else task_id


def comparison_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for c in comparison.cells:
        points = c.success_points
        rows.append([*c.cell, str(c.pairs), _pct(c.base_success), _pct(c.cur_success),
                     "—" if points is None else f"{points:+.1f}", _p(c.mcnemar_p), _reward(c),
                     "—" if c.reward is None else _p(c.reward.p_value), str(len(c.pass_to_fail)),
                     str(len(c.fail_to_pass)), c.verdict])
    return rows


def flip_rows(comparison: Comparison) -> list[list[str]]:
    """One row per cell and direction with the tasks that flipped (task#epoch when epochs > 0 exist)."""
    rows = []
    for c in comparison.cells:
        epochs = any(e for _, e in (*c.pass_to_fail, *c.fail_to_pass))
        for direction, flips in (("pass→fail", c.pass_to_fail), ("fail→pass", c.fail_to_pass)):
            if flips:
                rows.append([*c.cell, direction, ", ".join(flip_label(t, e, epochs) for t, e in flips)])
    return rows


def excluded_rows(comparison: Comparison) -> list[list[str]]:
    return [[*c.cell, reason, ", ".join(ids)] for c in comparison.cells for reason, ids in c.excluded.items()]


def _settings_line(comparison: Comparison) -> str:
    s = comparison.settings
    return (f"Pairs are (task, epoch). Verdicts: McNemar's exact test on success and a paired bootstrap "
            f"({s.resamples} resamples) on mean reward, each at α/2 = {s.alpha / 2:g}; "
            f"minimum effect {s.min_effect:g} points. Infrastructure failures and episodes cut short by "
            "the budget are left out of the pairs.")


def _missing_lines(comparison: Comparison) -> list[str]:
    lines = []
    for label, cells in (("only in the baseline", comparison.only_baseline),
                         ("only in the current run", comparison.only_current)):
        if cells:
            lines.append(f"Cells {label} (not compared): " + "; ".join(" / ".join(c) for c in cells))
    return lines


# ------------------------------------------------------------------ Markdown

def comparison_markdown(comparison: Comparison) -> list[str]:
    out = [_settings_line(comparison), ""]
    out += table(COLUMNS, comparison_rows(comparison))
    for line in _missing_lines(comparison):
        out += [f"{line}.", ""]
    out += ["### Flipped tasks", ""]
    flips = flip_rows(comparison)
    out += table(("model", "strategy", "task set", "direction", "tasks"), flips) if flips else ["None.", ""]
    excluded = excluded_rows(comparison)
    if excluded:
        out += ["### Left out of the verdicts", ""]
        out += table(("model", "strategy", "task set", "why", "tasks"), excluded)
    return out


def compare_markdown(comparison: Comparison, baseline: str, current: str) -> str:
    regressions = len(comparison.regressions)
    out = ["# Comparison", "", f"Baseline: `{baseline}`", "", f"Current: `{current}`", "",
           f"**{regressions} significant regression{'s' if regressions != 1 else ''}.**", ""]
    return "\n".join(out + comparison_markdown(comparison))


def nightly_markdown(report: NightlyReport) -> str:
    out = [f"# Nightly: {report.sweep}, {when(report.started_at)}", "", f"Status: **{report.status}**", "",
           f"Output: `{report.outdir}`", "", f"Baseline: {report.baseline or 'none (first good night)'}", "",
           "## Oracle gate", "", f"Gold solutions run: {report.gate_checked}; broken: {len(report.broken)}.", ""]
    if report.broken:
        out += table(("task set", "task", "why"), [[ts, tid, why] for (ts, tid), why in sorted(report.broken.items())])
    out += ["## Comparison with the baseline", ""]
    out += comparison_markdown(report.comparison) if report.comparison else ["No baseline to compare with.", ""]
    out += ["## Flaky tasks", "", _flaky_line(report), ""]
    if report.flaky:
        out += table(("model", "strategy", "task set", "task", "flips"), _flaky_rows(report))
    out += ["## Trends", ""]
    for metric, series in report.trends.items():
        out += [f"### {metric}", ""]
        out += table(("cell", *report.nights), [[name, *(_pct(v) for v in values)] for name, values in series])
    return "\n".join(out)


def _flaky_line(report: NightlyReport) -> str:
    excluded = "left out of the verdicts (--exclude-flaky)" if report.flaky_excluded else "kept in the verdicts"
    return f"{len(report.flaky)} flaky task(s), {excluded}."


def _flaky_rows(report: NightlyReport) -> list[list[str]]:
    return [[*cell, task_id, str(flips)] for (cell, task_id), flips in sorted(report.flaky.items())]


# ------------------------------------------------------------------ HTML

def _page(title: str, parts: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{STYLE}\n.regression {{ color: #b00020; font-weight: 600; }}"
            "\n#flips td:last-child, #excluded td:last-child {{ white-space: normal; }}"
            "</style>\n</head>\n<body>\n" + "\n".join(parts) + "\n</body>\n</html>\n")


def comparison_html(comparison: Comparison) -> list[str]:
    parts = [f"<p>{escape(_settings_line(comparison))}</p>",
             html_table(COLUMNS, comparison_rows(comparison), "comparison", names=3)]
    parts += [f"<p>{escape(line)}.</p>" for line in _missing_lines(comparison)]
    parts.append("<h3>Flipped tasks</h3>")
    flips = flip_rows(comparison)
    parts.append(html_table(("model", "strategy", "task set", "direction", "tasks"), flips, "flips", names=5)
                 if flips else '<p id="no-flips">None.</p>')
    excluded = excluded_rows(comparison)
    if excluded:
        parts += ["<h3>Left out of the verdicts</h3>",
                  html_table(("model", "strategy", "task set", "why", "tasks"), excluded, "excluded", names=5)]
    return parts


def compare_html(comparison: Comparison, baseline: str, current: str) -> str:
    regressions = len(comparison.regressions)
    summary = f"{regressions} significant regression{'s' if regressions != 1 else ''}."
    parts = ["<h1>Comparison</h1>", f"<p>Baseline: <code>{escape(baseline)}</code></p>",
             f"<p>Current: <code>{escape(current)}</code></p>",
             f'<p class="{"regression" if regressions else "ok"}" id="summary">{summary}</p>',
             *comparison_html(comparison)]
    return _page("Comparison", parts)


def nightly_html(report: NightlyReport) -> str:
    title = f"Nightly: {report.sweep}, {when(report.started_at)}"
    parts = [f"<h1>{escape(title)}</h1>",
             f'<p id="status" class="{escape(report.status)}">Status: {escape(report.status)}</p>',
             f"<p>Output: <code>{escape(report.outdir)}</code></p>",
             f"<p>Baseline: {escape(report.baseline or 'none (first good night)')}</p>",
             "<h2>Oracle gate</h2>",
             f"<p>Gold solutions run: {report.gate_checked}; broken: {len(report.broken)}.</p>"]
    if report.broken:
        rows = [[ts, tid, why] for (ts, tid), why in sorted(report.broken.items())]
        parts.append(html_table(("task set", "task", "why"), rows, "broken", names=3))
    parts.append("<h2>Comparison with the baseline</h2>")
    parts += comparison_html(report.comparison) if report.comparison else ["<p>No baseline to compare with.</p>"]
    parts += ["<h2>Flaky tasks</h2>", f"<p>{escape(_flaky_line(report))}</p>"]
    if report.flaky:
        parts.append(html_table(("model", "strategy", "task set", "task", "flips"), _flaky_rows(report), "flaky",
                                names=4))
    parts.append("<h2>Trends</h2>")
    parts += [trend_chart(f"{metric} per night", report.nights, series, metric)
              for metric, series in report.trends.items()]
    return _page(title, parts)
