"""Two runs side by side: the cells' verdicts (compare's own tests), the tasks paired, flipped first,
and one task's two episodes next to each other."""

from __future__ import annotations

from orchestrator.nightly.compare import Comparison
from orchestrator.view.layout import esc, link, pager, table, url
from orchestrator.view.pages import episode
from orchestrator.view.pairs import PairPage
from orchestrator.view.queries import EpisodeDetail
from orchestrator.view.source import Source

CHANGE_CLASS = {"broken": "bad", "fixed": "good", "same": "muted"}


def compare_url(a: Source, b: Source, **params: object) -> str:
    return url("/compare", {"a": a.index, "b": b.index, **params})


def comparison(a: Source, b: Source, result: Comparison, cell: tuple[str, str, str], found: PairPage, page_no: int,
               flipped_only: bool) -> str:
    head = (f"<h1>{esc(a.sweep)} → {esc(b.sweep)}</h1><p>A: <code>{esc(a.path)}</code><br>"
            f"B: <code>{esc(b.path)}</code></p>")
    return "\n".join([head, "<h2>Cells in both runs</h2>", _verdicts(a, b, result), *_one_sided(result),
                      _pairs(a, b, cell, found, page_no, flipped_only)])


def _verdicts(a: Source, b: Source, result: Comparison) -> str:
    rows = []
    for c in result.cells:
        model, strategy, task_set = c.cell
        points = "—" if c.success_points is None else f"{c.success_points:+.1f}"
        rows.append([esc(model), esc(strategy), esc(task_set), str(c.pairs), _share(c.base_success),
                     _share(c.cur_success), points, f"{c.mcnemar_p:.3g}", esc(c.verdict),
                     link(compare_url(a, b, model=model, strategy=strategy, task_set=task_set, flipped=1),
                          len(c.pass_to_fail) + len(c.fail_to_pass))])
    return table(("model", "strategy", "task set", "pairs", "A success", "B success", "points", "McNemar p",
                  "verdict", "flipped tasks"), rows, "verdicts", names=3)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _one_sided(result: Comparison) -> list[str]:
    parts = []
    for side, cells in (("A", result.only_baseline), ("B", result.only_current)):
        if cells:
            parts.append(f"<p>Only in {side}: {esc(', '.join(' / '.join(c) for c in cells))}</p>")
    return parts


def _pairs(a: Source, b: Source, cell: tuple[str, str, str], found: PairPage, page_no: int, flipped_only: bool) -> str:
    model, strategy, task_set = cell
    scope = " / ".join(part or "any" for part in cell)
    params = {"model": model, "strategy": strategy, "task_set": task_set, "flipped": 1 if flipped_only else ""}
    toggle = link(compare_url(a, b, **(params | {"flipped": "" if flipped_only else 1})),
                  "show every task" if flipped_only else "show flipped tasks only")
    rows = [[f'<span class="change {CHANGE_CLASS[p.change]}">{p.change}</span>', esc(p.task_id), str(p.epoch),
             esc(f"{p.model} / {p.strategy} / {p.task_set}"), f"{esc(p.a_status)} ({p.a_reward:.2f})",
             f"{esc(p.b_status)} ({p.b_reward:.2f})",
             link(url("/compare/pair", {"a": a.index, "b": b.index, "ea": p.a_id, "eb": p.b_id}), "side by side",
                  class_="pair-link")] for p in found.pairs]
    return "\n".join([f"<h2>Tasks of {esc(scope)}</h2>",
                      f'<p><span id="flipped-count">{found.flipped}</span> flipped of {found.total} shown · {toggle}</p>',
                      table(("change", "task", "epoch", "cell", "A", "B", ""), rows, "pairs", names=4),
                      pager(page_no, found.pages, lambda n: compare_url(a, b, **params, page=n))])


def side_by_side(a: Source, b: Source, left: EpisodeDetail, right: EpisodeDetail) -> str:
    return (f'<div class="pair"><div id="side-a"><p><strong>A</strong> <code>{esc(a.path)}</code></p>'
            f'{episode(a, left)}</div><div id="side-b"><p><strong>B</strong> <code>{esc(b.path)}</code></p>'
            f'{episode(b, right)}</div></div>')
