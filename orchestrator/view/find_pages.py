"""Pages for finding things across a store or all of them: one task everywhere (every model,
strategy and epoch), and a search of every open store."""

from __future__ import annotations

from collections import defaultdict

from foundation.outcome import Status
from orchestrator.store.episode_query import EpisodeFilter, EpisodePage, EpisodeRow, TaskEpisodes
from orchestrator.view.layout import esc, folded, link, plural, table, url
from orchestrator.view.lists import FORMATS, episode_href, list_table, status_html, task_href
from orchestrator.view.source import Source

SHOWN_PER_STORE = 10  # matches of each store on the search of every store


def task_page(source: Source, task_id: str, found: TaskEpisodes, elsewhere: list[Source]) -> str:
    """The task's query and gold, a grid of its episodes (a row per model and strategy, a column per
    epoch), then the same episodes as a list."""
    flt = EpisodeFilter(task_id=task_id, sort="cell")
    grid: dict[tuple[str, str, str], dict[int, EpisodeRow]] = defaultdict(dict)
    for r in found.rows:
        grid[(r.model, r.strategy, r.task_set)][r.epoch] = r
    epochs = sorted({r.epoch for r in found.rows})
    rows = [[esc(m), esc(s), esc(ts), *(_outcome(source, g.get(ep)) for ep in epochs)]
            for (m, s, ts), g in sorted(grid.items())]
    solved = sum(r.status == Status.SOLVED for r in found.rows)
    base = f"/s/{source.index}/episodes"
    downloads = " · ".join(link(url(base, flt.params(format=f)), f.upper(), class_="download") for f in FORMATS)
    others = [link(task_href(s.index, task_id), s.label) for s in elsewhere]
    return "\n".join([
        f"<h1>Task {esc(task_id)}</h1>",
        f"<p>{len(found.rows)} {plural(len(found.rows), 'episode')} in {esc(source.label)}, {solved} solved · "
        f"download as {downloads}"
        + (f" · the same task in {', '.join(others)}" if others else "") + "</p>",
        folded(found.query, "query"), folded(found.gold, "gold"),
        "<h2>Every model, strategy and epoch</h2>",
        table(("model", "strategy", "task set", *(f"epoch {ep}" for ep in epochs)), rows, "task-grid", names=3,
              css="sortable"),
        "<h2>Its episodes</h2>", list_table(source, flt, found.rows, {})])


def _outcome(source: Source, r: EpisodeRow | None) -> str:
    if r is None:
        return '<span class="muted">—</span>'
    return f'{link(episode_href(source.index, r.id), f"{r.reward:.2f}")} {status_html(r.status)}'


def search_section(source: Source, text: str, found: EpisodePage, snippets: dict[int, str], note: str) -> str:
    """One store's part of the search of every store: how many match, the newest few, a link to all."""
    flt = EpisodeFilter(text=text)
    every = link(url(f"/s/{source.index}/episodes", flt.params()), f"all {found.total} in {source.label} →")
    return "\n".join([
        f'<h2 id="store-{source.index}">{esc(source.label)}: <span class="store-count">{found.total}</span> '
        f"{'episode matches' if found.total == 1 else 'episodes match'}</h2>",
        f'<p class="warn">{esc(note)}</p>' if note else "",
        list_table(source, flt, found.rows[:SHOWN_PER_STORE], snippets) if found.rows else "",
        f"<p>{every}</p>" if found.total > SHOWN_PER_STORE else ""])


def search_page(text: str, sections: list[str]) -> str:
    form = (f'<form class="filters" method="get" action="/search"><label>words anywhere in an episode (its task, '
            'prompts, the model\'s outputs, actions, observations, error, gold; a OR b, "a phrase", prefix*)'
            f'<input name="text" value="{esc(text)}" size="40"></label>'
            '<button type="submit">search</button></form>')
    return "\n".join([f"<h1>Search of every store: {esc(text)}</h1>" if text else "<h1>Search of every store</h1>",
                      form, *sections])
