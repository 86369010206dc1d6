"""The report: a table per environment and source, the classes of difference with examples, and
one `name: value` line per headline figure at the end. Pure text from TurnRecords."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from checks.differential.turn_compare import (
    TERMS,
    TurnRecord,
    differences,
    self_differences,
    tally,
)

ENVS = ("bash", "sql", "python", "ctf")
SOURCES = ("gold", "recording", "variant")
EXAMPLES = 3


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def headline(records: list[TurnRecord]) -> dict[str, str]:
    """The figures issue 14 asks for. Bash on the recordings' actions (the target's measure); the
    other kinds on every turn compared (golds and recordings)."""
    bash = tally(r for r in records if r.kind == "bash" and r.source == "recording")
    out = {"bash_agreement": _fmt(bash.share())}
    out.update({f"bash_{term}_term": _fmt(bash.term_share(term)) for term in TERMS})
    for kind in ("sql", "python", "ctf"):
        out[f"{kind}_agreement"] = _fmt(tally(r for r in records if r.kind == kind).share())
    out["original_bash_self_agreement"] = _fmt(bash.self_share())
    return out


def table(records: list[TurnRecord]) -> list[str]:
    lines = [f"{'env':<7}{'source':<11}{'turns':>6}{'agree':>7}{'share':>7}{'fs':>7}{'content':>8}{'output':>7}"
             f"{'self':>7}{'left out':>9}"]
    for kind in ENVS:
        for source in SOURCES:
            chosen = [r for r in records if r.kind == kind and r.source == source]
            if not chosen:
                continue
            t = tally(chosen)
            terms = [_fmt(t.term_share(term)) if kind == "bash" else "" for term in TERMS]
            lines.append(f"{kind:<7}{source:<11}{t.turns:>6}{t.agree:>7}{_fmt(t.share()):>7}{terms[0]:>7}{terms[1]:>8}"
                         f"{terms[2]:>7}{_fmt(t.self_share()):>7}{t.uncompared:>9}")
    return lines


def _example(r: TurnRecord) -> str:
    def reward(answer: dict[str, Any] | None) -> str:
        if answer is None:
            return "-"
        if "error" in answer:
            return f"raised {answer['error'][:80]!r}"
        terms = answer.get("terms")
        parts = "/".join(f"{terms.get(name)}" for name in TERMS.values()) if terms else ""
        return f"{answer['reward']:.2f}" + (f" ({parts})" if parts else "")

    line = (f"    {r.suite} {r.episode} turn {r.turn + 1}: ours {reward(r.ours)}, original {reward(r.original)}"
            + (f", original again {reward(r.again)}" if r.again is not None else "") + f"; action {r.action[:70]!r}")
    ours_obs, original_obs = str(r.ours.get("observation", ""))[:70], str(r.original.get("observation", ""))[:70]
    if ours_obs != original_obs:
        line += f"\n      observation: ours {ours_obs!r}, original {original_obs!r}"
    return line


def classes(records: list[TurnRecord]) -> list[str]:
    lines: list[str] = []
    for kind in ENVS:
        groups = differences(r for r in records if r.kind == kind)
        if not groups:
            continue
        lines.append(f"[{kind}] {sum(len(g) for g in groups.values())} turns differ")
        for name, group in groups.items():
            sources = Counter(r.source for r in group)
            lines.append(f"  {name}: {len(group)} ({', '.join(f'{s} {n}' for s, n in sources.items())})")
            lines += [_example(r) for r in group[:EXAMPLES]]
    return lines


def self_report(records: list[TurnRecord]) -> list[str]:
    lines: list[str] = []
    for kind in ENVS:
        mine = self_differences(r for r in records if r.kind == kind)
        t = tally(r for r in records if r.kind == kind)
        if not t.self_turns:
            continue
        lines.append(f"[{kind}] the original against itself: {t.self_agree}/{t.self_turns} turns "
                     f"({_fmt(t.self_share())}){'; deterministic here' if not mine else ''}")
        lines += [_example(r) for r in mine[:EXAMPLES]]
    return lines


def render(records: list[TurnRecord], seconds: float, failures: list[str] | None = None) -> str:
    stopped = [f"suites that could not finish (their turns so far are counted): {len(failures)}",
               *(f"  {line}" for line in failures), ""] if failures else []
    title = ("per environment and source (share: reward agreement; fs/content/output: Bash's terms; "
             "self: the original against its second run)")
    parts = [*stopped, title, *table(records), "", "classes of difference", *classes(records),
             "", "the original's self-agreement", *self_report(records), "",
             f"wall time: {seconds / 60:.1f} min", *(f"{k}: {v}" for k, v in headline(records).items())]
    return "\n".join(parts)


def write_json(path: Path, records: list[TurnRecord]) -> None:
    path.write_text("\n".join(json.dumps(r.__dict__, default=str) for r in records) + "\n")
