"""An episode's page: its transcript. Every message the model saw, in order (each call shows what the
dialogue gained since the call before), each answer with what the provider sent beside it, and
next to the answer the turns it produced: action, observation, reward and the reward's breakdown.
A store without a transcript for the episode shows its turns, and says so."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator.store.episode_detail import EpisodeDetail
from agents.recording import LLMCall
from orchestrator.store.records import TurnRecord
from orchestrator.store.transcript import Call, turns_of_calls
from orchestrator.view import charts
from orchestrator.view.breakdown import breakdown
from orchestrator.view.layout import FOLD_CHARS, FOLD_LINES, cost, esc, folded, link, money, plural, table, url, when
from orchestrator.view.lists import status_html, task_href
from orchestrator.view.source import Source
from orchestrator.view.episode_timeline import timeline, words


def episode(source: Source, detail: EpisodeDetail, neighbours: str = "") -> str:
    """The whole episode: summary, task and gold, the transcript (or the turns), LLM calls, lineage."""
    e = detail.fields
    cell = (e["model"], e["strategy"], e["task_set"])
    cell_url = url(f"/s/{source.index}/episodes", dict(zip(("model", "strategy", "task_set"), cell, strict=True)))
    parts = [f"<h1>{esc(e['task_id'])} · epoch {e['epoch']}</h1>",
             f"<p>{link(cell_url, ' / '.join(cell))} · {link(task_href(source.index, e['task_id']), 'this task everywhere')}"
             f" · sweep {esc(source.label)}{neighbours}</p>",
             f'<div class="charts">{table(None, _summary(e), "summary", names=2)}{_reward_chart(detail.turns)}</div>',
             "<h2>Task</h2>", folded(e["query"], "query"), folded(e["gold"], "gold"),
             _downloads(source, e["id"])]
    if shown := timeline(detail.turns):
        parts += ["<h2>Timeline</h2>", shown]
    n = len(detail.turns)
    parts += [f"<h2>Transcript ({n} {plural(n, 'turn')})</h2>", _turns_nav(detail.turns)]
    parts += _transcript(detail)
    parts += [f"<h2>LLM calls ({len(detail.calls)})</h2>", _calls(detail.calls), "<h2>Lineage</h2>", _lineage(detail)]
    return "\n".join(parts)


def _summary(e: dict[str, Any]) -> list[list[str]]:
    return [["status", status_html(e["status"])], ["error class", esc(e["failure_class"] or "none")],
            ["error", f'<span id="error">{esc(e["error"] or "")}</span>'], ["reward", f"{e['reward']:.3f}"],
            ["solved", "yes" if e["success"] else "no"], ["turns", f"{e['n_turns']} of {e['max_turns']}"],
            ["tokens", f"{e['prompt_tokens']:,} prompt + {e['completion_tokens']:,} completion"],
            ["cost", cost(e["cost_usd"], e["unpriced_calls"])],
            ["attempts", str(e["attempts"])],
            ["time", f"{when(e['started_at'])} – {when(e['finished_at'])} UTC ({e['finished_at'] - e['started_at']:.2f} s)"]]


def _downloads(source: Source, number: int) -> str:
    base = f"/s/{source.index}/episodes/{number}"
    return (f'<p class="downloads small">download this episode: {link(url(base, {"format": "json"}), "JSON")} · '
            f'{link(url(base, {"format": "inspect"}), "Inspect sample")}</p>')


def _reward_chart(turns: Sequence[TurnRecord]) -> str:
    if len(turns) < 2:
        return ""
    return charts.lines("reward after each turn", "turn", [("reward", [t.reward for t in turns])], "chart-turn-rewards",
                        width=460, height=220, legend=70)


def _turns_nav(turns: Sequence[TurnRecord]) -> str:
    if not turns:
        return '<p class="muted">No turn was taken.</p>'
    links = [link(f"#turn-{i + 1}", i + 1, class_="r1" if t.reward == 1 else "r0" if t.reward <= 0 else "rp",
                  title=f"reward {t.reward:.3f}") for i, t in enumerate(turns)]
    return f'<p class="turns-nav">turns: {" ".join(links)}</p>'


def _transcript(detail: EpisodeDetail) -> list[str]:
    transcript = detail.transcript
    if transcript is None:
        return [f'<p class="muted" id="no-transcript">{esc(detail.transcript_note)}</p>',
                *(turn(i, t, show_output=True) for i, t in enumerate(detail.turns))]
    owned = _owned(detail.turns, len(transcript.calls)) or \
        turns_of_calls(transcript.calls, [t.output for t in detail.turns])
    usage = detail.calls if len(detail.calls) == len(transcript.calls) else [None] * len(transcript.calls)
    parts = _tools(transcript.calls)
    for n, (call, mine, used) in enumerate(zip(transcript.calls, owned, usage, strict=True)):
        sent = "".join(message(m) for m in call.added)  # what the dialogue gained: the context of the answer
        answer = message(call.answer, _answer_label(n, call, used), "answer")
        turns = "".join(turn(i, detail.turns[i]) for i in mine) or '<p class="muted small">(no turn: this answer ' \
                                                                    "ran nothing)</p>"
        parts.append(f'<div class="call" id="call-{n + 1}">{sent}<div class="exchange"><div>{answer}</div>'
                     f"<div>{turns}</div></div></div>")
    return parts


def _owned(turns: Sequence[TurnRecord], calls: int) -> list[list[int]] | None:
    """For each call, its turns, as stored with them (None in a store written before they were: the
    turns are then matched to the answers by text). A turn without a call (a closing `submit` the
    sweep sent) goes with the call before it."""
    if not turns or all(t.call is None for t in turns) or any(t.call is not None and not 0 <= t.call < calls
                                                              for t in turns):
        return None
    owned: list[list[int]] = [[] for _ in range(calls)]
    at = 0
    for i, t in enumerate(turns):
        at = t.call if t.call is not None else at
        owned[at].append(i)
    return owned


def _tools(calls: Sequence[Call]) -> list[str]:
    offered = [c.tools for c in calls if c.tools]
    if not offered:
        return []
    distinct = list({json.dumps(t, sort_keys=True): t for t in offered}.values())
    text = "\n\n".join(json.dumps(t, indent=1) for t in distinct)
    return [f'<details class="tools"><summary><strong>tools offered</strong> ({len(offered[0])} '
            f'{"function" if len(offered[0]) == 1 else "functions"})</summary><pre>{esc(text)}</pre></details>']


def _answer_label(n: int, call: Call, used: LLMCall | None) -> str:
    parts = [f"call {n + 1}: answer"]
    if used is not None:
        parts.append(f"{used.prompt_tokens:,} + {used.completion_tokens:,} tokens, {used.latency_s * 1000:.0f} ms, "
                     f"{money(used.cost_usd)}")
    parts += [f"{k.replace('_', ' ')}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in call.extra.items()]
    return " · ".join(parts)


def message(m: dict[str, Any], label: str = "", css: str = "") -> str:
    """One message as the model saw it: its role, its text (folded when long), its tool calls."""
    role = str(m.get("role", "?"))
    content = m.get("content")
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content, indent=1)
    calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in m.get("tool_calls") or []
             if isinstance(c, dict) and "function" in c]
    note = f" · answers {m['tool_call_id']}" if m.get("tool_call_id") else ""
    body = _text(text, css) if text else ""
    if calls:
        body += f'<pre class="tool-calls">{esc(chr(10).join(calls))}</pre>'
    return (f'<div class="message {esc(role)}"><div class="role">{esc(label or role)}{esc(note)}</div>'
            f"{body or '<p class=muted>(empty)</p>'}</div>")


def _text(text: str, css: str) -> str:
    """A message's text: whole when short, else its first lines with the rest a click away."""
    pre = f'<pre class="{css}">{esc(text)}</pre>'
    lines = text.count("\n") + 1
    if len(text) <= FOLD_CHARS and lines <= FOLD_LINES:
        return pre
    return f"<details><summary>{len(text):,} characters, {lines:,} lines</summary>{pre}</details>"


def turn(i: int, t: TurnRecord, show_output: bool = False) -> str:
    """A turn: its action, observation, reward, and the reward's breakdown where the kind gives one."""
    if t.action is None:
        state = " · no action in the answer"
    elif not t.executed:
        state = ' · <span class="bad" title="exit status not 0, or the query or code raised">the action failed</span>'
    else:
        state = ""
    took = f' · <span class="small muted">{esc(words(t))}</span>' if t.spans else ""
    parts = [f'<section class="turn" id="turn-{i + 1}"><h3>Turn {i + 1} · reward after it: {t.reward:.3f}{state}{took}</h3>']
    if show_output:
        parts.append(folded(t.output, "model output", "output"))
    if t.rewritten is not None:
        parts.append(f'<div class="rewritten"><span class="small"><strong>rewritten</strong>: the strategy kept this in '
                     f"the dialogue in place of the answer, and the model's next call saw it</span>"
                     f"{folded(t.rewritten, 'kept instead', 'kept')}</div>")
    parts += [folded(t.action, "action", "action"), folded(t.observation, "observation", "observation")]
    if t.breakdown:
        parts.append(breakdown(i, t.breakdown))
    return "".join(parts) + "</section>"


def _calls(calls: Sequence[LLMCall]) -> str:
    if not calls:
        return '<p class="muted">No LLM call (an offline model, or none succeeded).</p>'
    rows = [[str(i + 1), esc(c.model), esc(c.served_model or "—"), f"{c.prompt_tokens:,}", f"{c.completion_tokens:,}",
             f"{c.latency_s * 1000:.0f} ms", str(c.attempts), money(c.cost_usd)] for i, c in enumerate(calls)]
    return table(("call", "model", "served as", "prompt tokens", "completion tokens", "latency", "attempts", "cost"),
                 rows, "calls", names=3, css="sortable")


def _lineage(detail: EpisodeDetail) -> str:
    e, run = detail.fields, detail.run
    rows = [["image", esc(e["image"])], ["image digest", esc(e["image_digest"] or "(unknown)")],
            ["model as served", esc(e["served_model"] or "(not reported)")], ["environment", esc(e["env"])],
            ["dataset", f"{esc(e['dataset'])} #{e['task_index']}"], ["run", f"{run.get('id', '—')} ({esc(run.get('status'))})"],
            ["host", esc(e.get("host") or run.get("host") or "—")], ["sweep ran on", esc(run.get("host") or "—")],
            ["git sha", esc(run.get("git_sha") or "—")], ["sweep file sha256", esc(run.get("sweep_hash") or "—")]]
    return table(None, rows, "lineage", names=2)
