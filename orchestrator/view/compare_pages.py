"""Two runs side by side: the cells' verdicts (compare's own tests), the tasks paired, flipped first,
and one task's two episodes with their turns aligned and what differs marked."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from orchestrator.nightly.compare import Comparison
from orchestrator.store.episode_detail import EpisodeDetail
from orchestrator.store.episode_pairs import Pair
from orchestrator.store.records import TurnRecord
from orchestrator.view.diff import marked
from orchestrator.view.layout import cost, esc, folded, link, name, pager, table, url
from orchestrator.view.lists import status_html
from orchestrator.view.pairs import PairPage
from orchestrator.view.source import Source

CHANGE_CLASS = {"broken": "bad", "fixed": "good", "same": "muted"}
Cell = tuple[str, str, str]


def compare_url(a: Source, b: Source, **params: object) -> str:
    return url("/compare", {"a": a.index, "b": b.index, **params})


def pair_url(a: Source, b: Source, pair: Pair, cell: Cell) -> str:
    model, strategy, task_set = cell
    return url("/compare/pair", {"a": a.index, "b": b.index, "ea": pair.a_id, "eb": pair.b_id, "model": model,
                                 "strategy": strategy, "task_set": task_set})


def _sides(a: Source, b: Source) -> str:
    return (f"<p>A: <strong>{esc(a.label)}</strong> <code>{esc(a.path)}</code><br>"
            f"B: <strong>{esc(b.label)}</strong> <code>{esc(b.path)}</code></p>")


def comparison(a: Source, b: Source, result: Comparison, cell: Cell, found: PairPage, page_no: int,
               flipped_only: bool) -> str:
    head = f"<h1>{esc(a.label)} → {esc(b.label)}</h1>{_sides(a, b)}"
    return "\n".join([head, "<h2>Cells in both runs</h2>", _verdicts(a, b, result), *_one_sided(result),
                      _pairs(a, b, cell, found, page_no, flipped_only)])


def _verdicts(a: Source, b: Source, result: Comparison) -> str:
    rows = []
    for c in result.cells:
        model, strategy, task_set = c.cell
        points = "—" if c.success_points is None else f"{c.success_points:+.1f}"
        rows.append([name(model), name(strategy), name(task_set), str(c.pairs), _share(c.base_success),
                     _share(c.cur_success), points, f"{c.mcnemar_p:.3g}", esc(c.verdict),
                     link(compare_url(a, b, model=model, strategy=strategy, task_set=task_set, flipped=1),
                          len(c.pass_to_fail) + len(c.fail_to_pass))])
    return table(("model", "strategy", "task set", "pairs", "A success", "B success", "points", "McNemar p",
                  "verdict", "flipped tasks"), rows, "verdicts", names=3, css="sortable keys")


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _one_sided(result: Comparison) -> list[str]:
    parts = []
    for side, cells in (("A", result.only_baseline), ("B", result.only_current)):
        if cells:
            parts.append(f"<p>Only in {side}: {esc(', '.join(' / '.join(c) for c in cells))}</p>")
    return parts


def _pairs(a: Source, b: Source, cell: Cell, found: PairPage, page_no: int, flipped_only: bool) -> str:
    model, strategy, task_set = cell
    params = {"model": model, "strategy": strategy, "task_set": task_set, "flipped": 1 if flipped_only else ""}
    toggle = link(compare_url(a, b, **(params | {"flipped": "" if flipped_only else 1})),
                  "show every task" if flipped_only else "show flipped tasks only")
    rows = [[link(pair_url(a, b, p, cell), "side by side", class_="pair-link"),
             f'<span class="change {CHANGE_CLASS[p.change]}">{p.change}</span>', name(p.task_id), str(p.epoch),
             name(f"{p.model} / {p.strategy} / {p.task_set}"), f"{esc(p.a_status)} ({p.a_reward:.2f})",
             f"{esc(p.b_status)} ({p.b_reward:.2f})"] for p in found.pairs]
    downloads = " · ".join(link(compare_url(a, b, **params, format=f), f.upper(), class_="download") for f in ("csv", "json"))
    return "\n".join([f"<h2>{esc(_scope(cell))}</h2>",
                      f'<p><span id="flipped-count">{found.flipped}</span> flipped of {found.total} shown · {toggle} · '
                      f'download as {downloads}</p>',
                      table(("", "change", "task", "epoch", "cell", "A", "B"), rows, "pairs", names=5,
                            css="sortable keys list"),
                      pager(page_no, found.pages, lambda n: compare_url(a, b, **params, page=n))])


def _scope(cell: Cell) -> str:
    """The heading of the pairs of `cell`: the parts it names ("of strategy react"), or every cell."""
    named = [f"{label} {value}" for label, value in zip(("model", "strategy", "task set"), cell, strict=True) if value]
    return f"Tasks in both runs, of {', '.join(named) if named else 'every cell'}"


def side_by_side(a: Source, b: Source, left: EpisodeDetail, right: EpisodeDetail, around: tuple[Pair | None, Pair | None],
                 cell: Cell) -> str:
    """One task's episode in A and in B: the summaries in two columns, then the turns aligned by
    number, what differs in actions and observations marked (A's own parts struck, B's added)."""
    before, after = around
    e, f = left.fields, right.fields
    nav = [link(pair_url(a, b, before, cell), "← previous flipped task", rel="prev") if before else "",
           link(compare_url(a, b, model=cell[0], strategy=cell[1], task_set=cell[2]), "all pairs"),
           link(pair_url(a, b, after, cell), "next flipped task →", rel="next") if after else "no flipped task after this"]
    parts = [f"<h1>{esc(e['task_id'])} · epoch {esc(_both(e['epoch'], f['epoch']))}: A against B</h1>", _sides(a, b),
             f'<p class="pair-nav">{" · ".join(p for p in nav if p)} <span class="keys-help">(keys n/p)</span></p>',
             f"<p>{esc(_both(*(' / '.join((x['model'], x['strategy'], x['task_set'])) for x in (e, f))))}</p>",
             _summaries(a, b, e, f), "<h2>Task</h2>", folded(e["query"], "query"),
             f"<h2>Turns, aligned ({len(left.turns)} in A, {len(right.turns)} in B)</h2>",
             _aligned(a, b, left, right)]
    return "\n".join(parts)


def _both(in_a: object, in_b: object) -> str:
    """What A's and B's episodes have: once when it is the same (a pair opened from the list), else each's."""
    return str(in_a) if in_a == in_b else f"{in_a} in A, {in_b} in B"


def _summaries(a: Source, b: Source, x: dict[str, Any], y: dict[str, Any]) -> str:
    def row(label: str, render: Any, key: str) -> list[str]:
        cells = [render(x), render(y)]
        mark = ' class="bad"' if x[key] != y[key] else ""
        return [f"<span{mark}>{esc(label)}</span>", *cells]
    rows = [row("status", lambda e: status_html(e["status"]), "status"),
            row("reward", lambda e: f"{e['reward']:.3f}", "reward"),
            row("solved", lambda e: "yes" if e["success"] else "no", "success"),
            row("turns", lambda e: str(e["n_turns"]), "n_turns"),
            row("tokens", lambda e: f"{e['prompt_tokens'] + e['completion_tokens']:,}", "prompt_tokens"),
            row("cost", lambda e: esc(cost(e["cost_usd"], e["unpriced_calls"])), "cost_usd"),
            row("error", lambda e: esc(e["error"] or "—"), "error"),
            ["episode", link(f"/s/{a.index}/episodes/{x['id']}", f"A's episode {x['id']}"),
             link(f"/s/{b.index}/episodes/{y['id']}", f"B's episode {y['id']}")]]
    return table(("", "A", "B"), rows, "pair-summary", names=3)


def _aligned(a: Source, b: Source, left: EpisodeDetail, right: EpisodeDetail) -> str:
    cells = ['<div class="head">turn</div>', f'<div class="head">A: {esc(a.label)}</div>',
             f'<div class="head">B: {esc(b.label)}</div>']
    for i, (x, y) in enumerate(zip_longest(left.turns, right.turns)):
        shown_x, shown_y, differs = _turn_pair(x, y)
        css = ' differs' if differs else ""
        cells += [f'<div class="index" id="pair-turn-{i + 1}">{i + 1}</div>', f'<div class="side-a{css}">{shown_x}</div>',
                  f'<div class="side-b{css}">{shown_y}</div>']
    return f'<div class="aligned" id="aligned">{"".join(cells)}</div>'


def _turn_pair(x: TurnRecord | None, y: TurnRecord | None) -> tuple[str, str, bool]:
    if x is None or y is None:
        missing = '<p class="muted">(no such turn)</p>'
        return (_turn(x, x and x.action or "", x and x.observation or "") if x else missing,
                _turn(y, y and y.action or "", y and y.observation or "") if y else missing, True)
    action_x, action_y, acts = marked(x.action or "", y.action or "")
    seen_x, seen_y, sees = marked(x.observation, y.observation)
    return _turn(x, action_x, seen_x, True), _turn(y, action_y, seen_y, True), acts or sees or x.reward != y.reward


def _turn(t: TurnRecord, action: str, observation: str, is_html: bool = False) -> str:
    text = (lambda s: s) if is_html else esc
    return (f'<div class="small">reward after it: <strong>{t.reward:.3f}</strong></div>'
            f'<details><summary>the model\'s answer</summary><pre class="output">{esc(t.output)}</pre></details>'
            f'<div><strong>action</strong><pre class="action">{text(action) if t.action is not None else "(none)"}</pre></div>'
            f'<div><strong>observation</strong><pre class="observation">{text(observation)}</pre></div>')
