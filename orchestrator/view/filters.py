"""An episode list's filters: the form above the list, and the check of an address's cell against
the store.

A cell's parts (model, strategy, task set) are chosen from the values the store holds, so the form
cannot ask for one it lacks; an address that does (`model=local-sim` where `openai/local-sim` is
meant, typed or kept from another store) is one line naming the store's values, the ones that
contain it first, rather than a list of nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from foundation.errors import ConfigError
from orchestrator.store.episode_query import FAILURE_CLASSES, FAILURE_LABELS, SORTS, STATUSES, CellProgress, EpisodeFilter
from orchestrator.view.layout import esc
from orchestrator.view.source import Source

CELL_PARTS = {"model": "models", "strategy": "strategies", "task_set": "task sets"}  # a part -> its plural
SHOWN = 12  # values named in a line, at most
Values = Mapping[str, Sequence[str]]  # a cell's part -> the store's values of it, sorted


def store_values(cells: Sequence[CellProgress]) -> dict[str, list[str]]:
    """The values of each part of a cell that the store's episodes have."""
    return {part: sorted({getattr(c, part) for c in cells}) for part in CELL_PARTS}


def check_cell(flt: EpisodeFilter, values: Values) -> None:
    """ConfigError when a part of the filter's cell is a value the store does not have."""
    check_parts((flt.model, flt.strategy, flt.task_set), values)


def check_parts(cell: Sequence[str], values: Values, where: str = "this store") -> None:
    """ConfigError when a part of `cell` (model, strategy, task set; empty: any) is not among `values`."""
    for (part, many), wanted in zip(CELL_PARTS.items(), cell, strict=True):
        if wanted and wanted not in values[part]:
            raise ConfigError(f"{part} {wanted[:80]!r} is not in {where}: {_hint(wanted, values[part], many)}")


def _hint(wanted: str, present: Sequence[str], many: str) -> str:
    near = [v for v in present if wanted.lower() in v.lower()]
    if len(near) == 1:
        return f"did you mean {near[0]!r}?"
    if near:
        return f"did you mean one of {_named(near)}?"
    return f"its {many} are {_named(present)}" if present else "it has no episode yet"


def _named(values: Sequence[str]) -> str:
    more = len(values) - SHOWN
    return ", ".join(values[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def filter_form(source: Source, flt: EpisodeFilter, values: Values) -> str:
    """The filters of the list at `/s/N/episodes`, set to `flt`; a cell's parts are `values`."""
    def select(name: str, label: str, options: Sequence[str], current: str, labels: Mapping[str, str]) -> str:
        items = "".join(f'<option value="{esc(o)}"{" selected" if o == current else ""}>{esc(labels.get(o, o))}</option>'
                        for o in options)
        return f'<label>{esc(label)}<select name="{name}">{items}</select></label>'

    def box(name: str, value: str, size: int = 14, label: str = "") -> str:
        return (f'<label>{esc(label or name.replace("_", " "))}<input name="{name}" value="{esc(value)}" '
                f'size="{size}"></label>')
    every = {"": "all"}
    sort_labels = {s: s.replace("-asc", " (lowest first)").replace("-desc", " (last first)") for s in SORTS}
    return (f'<form class="filters" method="get" action="/s/{source.index}/episodes">'
            + "".join(select(part, part.replace("_", " "), ("", *values[part]), getattr(flt, part), every)
                      for part in CELL_PARTS)
            + select("status", "status", ("", *STATUSES), flt.status, every)
            + select("success", "solved", ("", "yes", "no"), flt.success, every)
            + select("failure", "error class", ("", *FAILURE_CLASSES), flt.failure, FAILURE_LABELS)
            + box("min_reward", flt.min_reward, 4) + box("max_reward", flt.max_reward, 4)
            + box("text", flt.text, 18, "words anywhere in the episode")
            + select("sort", "order", tuple(SORTS), flt.sort, sort_labels)
            + (f'<input type="hidden" name="task_id" value="{esc(flt.task_id)}">' if flt.task_id else "")
            + '<button type="submit">show</button></form>')
