"""`replay --explain FILE TASK`: one recorded episode and its replay side by side, turn by turn: the
action, the reward recorded and ours, each part of the reward (ours as our environment computed
it; the recording's as the split of its sum nearest ours, `KindSpec.recorded_parts`), what our
scoring found missing or extra, and where the observations part.

    episode = pick(episodes, "12")                  # ConfigError naming the keys there are
    print("\n".join(explain(episode, results, task)))
"""

from __future__ import annotations

from typing import Any

from environments.kind import kind_spec
from foundation.errors import ConfigError
from orchestrator.fidelity.replay import lifecycle
from orchestrator.fidelity.replayed_turn import TurnResult
from orchestrator.fidelity.trajectories import RecordedEpisode, shown
from tasks import Task

ONE = 1 - 1e-9
NAMES = {"file_changes": "file changes", "file_contents": "file contents", "output_similarity": "output"}
WIDTH = 100  # characters of an action or an observation's line shown


def pick(episodes: list[RecordedEpisode], wanted: str) -> list[RecordedEpisode]:
    """The episodes to replay to explain episode `wanted` (its key in the file, or its task id):
    in a file replayed in the original's containers, every episode up to it (their history is its
    world); else it alone. ConfigError when the file has no such episode."""
    for index, episode in enumerate(episodes):
        if wanted in (episode.key, str(episode.task_id)):
            return episodes[:index + 1] if lifecycle(episode) == "original" else [episode]
    keys = [e.key for e in episodes]
    some = ", ".join(keys[:5]) + (f" ... {keys[-1]}" if len(keys) > 5 else "")
    raise ConfigError(f"--explain: the file has no episode {shown(wanted)} (its episodes: {some or 'none'}); "
                      "give an episode's key or task id")


def explain(episode: RecordedEpisode, results: list[TurnResult], task: Task | None, before: int = 0) -> list[str]:
    """The episode's turns side by side, as lines of text; `before`: how many episodes of its file
    were replayed ahead of it, in the same containers."""
    turns = [r for r in results if r.episode == episode.key]
    recorded_best = max((t.reward for t in episode.turns if t.reward is not None), default=0.0)
    ours_best = max((r.ours for r in turns if r.ours is not None), default=0.0)
    lines = [f"episode {shown(episode.key)} of {episode.source} ({episode.strategy}, task {episode.task_id})"
             + (f", replayed after the {before} episodes before it in the same containers" if before else "")]
    if task is not None:
        lines += [f"  query: {_line(task.query)}", f"  gold:  {_line(task.gold_text)}"]
    lines.append(f"  success: recorded {_solved(recorded_best)} (best {recorded_best:.2f}), "
                 f"ours {_solved(ours_best)} (best {ours_best:.2f})")
    split = kind_spec(episode.kind).recorded_parts
    for result in turns:
        recorded = "-" if result.recorded is None else f"{result.recorded:.2f}"
        ours = "not scored" if result.ours is None else f"{result.ours:.2f}"
        verdict = "agree" if result.agree else ("left out: " + result.flag if result.flag else "DIFFER")
        lines.append(f"turn {result.turn + 1}: recorded {recorded}, ours {ours}: {verdict}")
        lines.append(f"  action: {_line(result.action)}")
        if result.ours is None:
            lines.append(f"  why not scored: {result.reason}")
            continue
        if result.parts:
            theirs = split(result.recorded, result.parts) if result.recorded is not None else None
            lines += _parts(result.parts, theirs)
        recorded_observation = episode.turns[result.turn].observation
        lines.append(f"  observation: {_observations(recorded_observation, result.observation)}")
    return lines


def _parts(ours: dict[str, Any], theirs: dict[str, float] | None) -> list[str]:
    named = [name for name in NAMES if isinstance(ours.get(name), int | float)]
    lines = []
    if named:
        header = "recorded (nearest split)" if theirs else "recorded"
        lines.append(f"  {'part':<14} {header:>24} {'ours':>6}")
        for name in named:
            recorded = f"{theirs[name]:.2f}" if theirs else "?"
            mark = "  <- differs" if theirs and abs(theirs[name] - float(ours[name])) > 0.005 else ""
            lines.append(f"  {NAMES[name]:<14} {recorded:>24} {float(ours[name]):>6.2f}{mark}")
    for key in ("missing", "extra"):
        if ours.get(key):
            lines.append(f"  our changes {key} against the gold's: {_line(str(ours[key]))}")
    others = {k: v for k, v in ours.items() if k not in NAMES and k not in ("missing", "extra", "constant",
                                                                              "changes_missing", "changes_extra")}
    if others:
        lines.append("  " + ", ".join(f"{k} {_line(str(v), 40)}" for k, v in others.items()))
    return lines


def _observations(recorded: Any, ours: str) -> str:
    recorded_text = recorded if isinstance(recorded, str) else str(recorded)
    if recorded_text.strip() == ours.strip():
        return f"the same ({len(ours.splitlines())} lines)"
    theirs, mine = recorded_text.splitlines(), ours.splitlines()
    for number, (a, b) in enumerate(zip(theirs, mine), 1):
        if a != b:
            return f"part at line {number}: recorded {_line(a, 60)!r}, ours {_line(b, 60)!r}"
    return (f"recorded {len(theirs)} lines, ours {len(mine)}; the first extra line: "
            f"{_line((theirs if len(theirs) > len(mine) else mine)[min(len(theirs), len(mine))], 60)!r}")


def _solved(best: float) -> str:
    return "solved" if best >= ONE else "not solved"


def _line(text: str, limit: int = WIDTH) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 3] + "..."
