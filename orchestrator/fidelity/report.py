"""What `replay` prints: per-turn agreement, the mismatches with their reasons, the turns left
out of the share and why, and the bad episodes, one line each."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from orchestrator.fidelity.replayed_turn import TurnResult
from orchestrator.fidelity.trajectories import shown


def report(results: list[TurnResult], show: int, bad: list[str] | None = None) -> None:
    counted = [r for r in results if r.counted]
    by_turn: dict[int, list[TurnResult]] = defaultdict(list)
    for result in counted:
        by_turn[result.turn].append(result)
    print(f"{'turn':>4}  {'turns':>6}  {'agree':>6}  share")
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        agree = sum(r.agree for r in rows)
        print(f"{turn + 1:>4}  {len(rows):>6}  {agree:>6}  {agree / len(rows):.3f}")
    mismatches = [r for r in counted if not r.agree]
    if mismatches:
        print(f"\n{len(mismatches)} mismatches (recorded -> ours), first {min(show, len(mismatches))}:")
        for r in mismatches[:show]:
            print(f"  ep {shown(r.episode)} turn {r.turn + 1}: {r.recorded} -> {r.ours:.2f}  {r.action[:50]!r}  "
                  f"{r.reason}")
    _list_left_out([r for r in results if r.ours is None], "not scored", lambda r: r.reason, show)
    flagged = [r for r in results if r.ours is not None and r.flag]
    comparable = [r for r in flagged if r.recorded is not None]
    anyway = f" ({sum(r.agree for r in comparable)} of {len(comparable)} agree anyway)" if comparable else ""
    _list_left_out(flagged, f"scored but not counted{anyway}", lambda r: r.flag, show)
    report_bad(bad or [], show)
    print(agreement_line(results))


def report_bad(bad: list[str], show: int) -> None:
    """The bad episodes, one line each (file, episode, why): the replay scored the others."""
    if not bad:
        return
    print(f"\n{_count(len(bad), 'bad episode')} (replayed no further; the others are scored):")
    for line in bad[:show]:
        print(f"  {line}")
    if len(bad) > show:
        print(f"  and {len(bad) - show} more (--mismatches N lists more)")


def agreement_line(results: list[TurnResult]) -> str:
    counted = [r for r in results if r.counted]
    agreed = sum(r.agree for r in counted)
    left_out = left_out_counts(results)
    return f"agreement: {agreed / max(len(counted), 1):.3f} ({len(counted)} turns{'; ' + left_out if left_out else ''})"


def _list_left_out(rows: list[TurnResult], what: str, why: Callable[[TurnResult], str], show: int) -> None:
    """Turns left out of the agreement share, grouped by why."""
    if not rows:
        return
    print(f"\n{_count(len(rows), 'turn')} of {_count(len({r.episode for r in rows}), 'episode')} {what}:")
    groups: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        groups[why(r)].append(r.episode)
    for reason, keys in list(groups.items())[:show]:
        episodes = list(dict.fromkeys(keys))
        more = f" and {len(episodes) - 5} more" if len(episodes) > 5 else ""
        print(f"  {_count(len(keys), 'turn')} of ep {', '.join(shown(k) for k in episodes[:5])}{more}: {reason}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def left_out_counts(results: list[TurnResult]) -> str:
    """How many turns the agreement share leaves out, and why: "2 flagged, 3 not scored"."""
    flagged = sum(r.ours is not None and bool(r.flag) for r in results)
    unscored = sum(r.ours is None for r in results)
    return ", ".join(f"{n} {what}" for n, what in ((flagged, "flagged"), (unscored, "not scored")) if n)


def write_json(path: Path, results: list[TurnResult]) -> None:
    episodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for result in results:
        episodes[result.episode].append({k: v for k, v in asdict(result).items() if k != "episode"})
    write_text(path, json.dumps(episodes, indent=1))


def write_text(path: Path, text: str) -> None:
    """`text` into `path`, or onto stdout when the path is `-`."""
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        return
    try:
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"--json {shown(path, 400)} cannot be written: {exc.strerror or exc}") from None
