"""Which of the original's scripts wrote a trajectory file, told from its content, and its episodes.

The shapes (from each script of the original's `experiments/`, and its environment's logger):

- `eval_n_turn.py` (Single, Try Again): a JSON object keyed by task index; `turn_history` has
  `actions` (already parsed), `observations`, `rewards`, `valid_action`; `summary.turns_max` is
  the run's `--max_turns` (1: Single).
- `eval_react.py` (ReAct): the same, with `turn_history.thoughts`; the actions are the raw
  `Action N:` text, and a last `submit` turn follows when the episode ran out of turns.
- `eval_ctf.py` (CTF): the same for `ic_ctf`, without `valid_action` (its summary counts
  `num_submissions`); an action may be the list the policy returned (the first one ran).
- `eval_plan_solve.py` (Plan & Solve, with or without refine): `{"meta": <its arguments>,
  "logs": {<index>: <episode>}}`; `turn_history.steps` holds the plan, one action per step, and
  the turns after them are the refine round's. An earlier version of the script wrote the episodes
  as a flat object keyed by task index, as `eval_n_turn.py` did; their `turn_history.steps` tells
  them apart. Without `meta`, the refine round shows only by its turns: a file with an episode
  that has turns after its plan is "+ refine".
- the human study (`IntercodeEnv.save_trajectory`, at each `submit`): records `{environment,
  query_idx, query, gold, reward, trajectory: [{action, observation}], info}`, one per file, or an
  array or object of them. One reward per episode, the one of its last action (the submit).

The format of a file decides how its turns are replayed (`rules.py`) and its strategy's name in
the success table (`table.py`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from foundation.errors import ConfigError
from orchestrator.fidelity.trajectories import (
    CTF,
    HUMAN,
    N_TURN,
    PLAN_SOLVE,
    REACT,
    BadEpisode,
    RecordedEpisode,
    RecordedTurn,
    file_label,
    history_episodes,
    json_type,
    json_value,
    kind_named,
    load_json,
    reward_value,
    text_field,
    with_file_kind,
)

SINGLE, TRY_AGAIN, PLAN_AND_SOLVE, REFINE = "Single", "Try Again", "Plan & Solve", "Plan & Solve + refine"
# The strategy of a format whose name does not depend on the run's arguments.
STRATEGY = {REACT: "ReAct", CTF: "CTF", HUMAN: "human"}
KNOWN = ("a JSON object keyed by episode, each with a turn_history (eval_n_turn.py, eval_react.py with "
         "thoughts, eval_ctf.py, an earlier eval_plan_solve.py with steps), an object with meta and logs "
         "(eval_plan_solve.py), or human-study records "
         "{query_idx, query, gold, reward, trajectory} (one, or an array or object of them)")


def read_recording(path: Path) -> list[RecordedEpisode]:
    """The episodes of a file of any known format, each marked with its format and strategy;
    one-line ConfigError for a file in none of them."""
    raw = load_json(path)
    fmt = detect(raw)
    if fmt is None:
        raise ConfigError(f"{file_label(path)} is not a trajectory file of a known format: found {json_type(raw)}, "
                          f"expected {KNOWN}")
    if fmt == PLAN_SOLVE:
        return _plan_solve(path, raw)
    if fmt == HUMAN:
        return _human(path, raw)
    episodes = history_episodes(path, raw, fmt)
    if fmt != N_TURN:
        return [replace(e, strategy=STRATEGY[fmt]) for e in episodes]
    return [replace(e, strategy=_n_turn_strategy(value)) for e, value in zip(episodes, raw.values())]


def detect(raw: object) -> str | None:
    """The script that wrote `raw`, by its shape; None when no script of the original wrote it.
    A JSON object that is none of the others is read as keyed episodes, so that its faults are
    named episode by episode."""
    if isinstance(raw, list):
        return HUMAN if raw and all(_is_record(r) for r in raw) else None
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("meta"), dict) and isinstance(raw.get("logs"), dict):
        return PLAN_SOLVE
    if _is_record(raw) or (raw and all(_is_record(v) for v in raw.values())):
        return HUMAN
    histories = [v["turn_history"] for v in raw.values()
                 if isinstance(v, dict) and isinstance(v.get("turn_history"), dict)]
    if any("thoughts" in h for h in histories):
        return REACT
    if any("steps" in h for h in histories):  # the older eval_plan_solve.py: flat, without meta
        return PLAN_SOLVE
    ctf = all(isinstance(v, dict) and v.get("environment") == "ic_ctf" for v in raw.values())
    if histories and ctf and not any("valid_action" in h for h in histories):
        return CTF
    return N_TURN


def _is_record(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("trajectory"), list) and "turn_history" not in value


def _n_turn_strategy(value: Any) -> str:
    """Single is eval_n_turn.py run with `--max_turns 1`; the summary keeps it."""
    summary = value.get("summary") if isinstance(value, dict) else None
    return SINGLE if isinstance(summary, dict) and summary.get("turns_max") == 1 else TRY_AGAIN


def _plan_solve(path: Path, raw: dict[str, Any]) -> list[RecordedEpisode]:
    flat = not (isinstance(raw.get("meta"), dict) and isinstance(raw.get("logs"), dict))
    meta, logs = ({}, raw) if flat else (raw["meta"], raw["logs"])
    episodes = [_with_plan(e, v) for e, v in zip(history_episodes(path, logs, PLAN_SOLVE), logs.values())]
    if flat:  # no arguments kept: a refine round shows by turns after the plan
        refine = any(e.plan_steps is not None and len(e.turns) > e.plan_steps for e in episodes)
    else:  # the refine round ran only with both `--refine` and `--refine_turns`
        refine = bool(meta.get("refine") and meta.get("refine_turns"))
    return [replace(e, strategy=REFINE if refine else PLAN_AND_SOLVE) for e in episodes]


def _with_plan(episode: RecordedEpisode, value: Any) -> RecordedEpisode:
    """The episode with its plan's length; a bad one when its steps can't be the plan of its turns."""
    if episode.bad:
        return episode
    steps = value["turn_history"].get("steps", [None] * len(episode.turns))
    if not isinstance(steps, list) or len(steps) > len(episode.turns):
        return replace(episode, bad=f"turn_history.steps is {json_value(steps)}; expected a list of the plan's "
                                    "steps, one per turn before the refine round")
    return replace(episode, plan_steps=len(steps))


def _human(path: Path, raw: dict[str, Any] | list[Any]) -> list[RecordedEpisode]:
    if isinstance(raw, dict) and _is_record(raw):  # one record per file, as the environment saved it
        items: list[tuple[str, Any]] = [(str(raw.get("query_idx", 0)), raw)]
    elif isinstance(raw, list):
        items = [(str(i), record) for i, record in enumerate(raw)]
    else:
        items = [(str(key), record) for key, record in raw.items()]
    return with_file_kind([_human_episode(path, key, record) for key, record in items])


def _human_episode(path: Path, key: str, record: dict[str, Any]) -> RecordedEpisode:
    try:
        kind = kind_named(record.get("environment", "ic_sql"))  # the study was of SQL
        reward = reward_value(record.get("reward"))
        query = text_field(record, "query")
        turns = _human_turns(record["trajectory"])
    except BadEpisode as exc:
        return RecordedEpisode(key, "", "", record.get("query_idx"), "", exc.turns, str(path), format=HUMAN,
                       strategy=STRATEGY[HUMAN], bad=str(exc))
    if turns:  # the episode's one reward is its last action's (the submit that saved the record)
        turns[-1] = replace(turns[-1], reward=reward)
    return RecordedEpisode(key, kind, "", record.get("query_idx"), query, turns, str(path), format=HUMAN,
                   strategy=STRATEGY[HUMAN])


def _human_turns(steps: list[Any]) -> list[RecordedTurn]:
    turns: list[RecordedTurn] = []
    for n, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            raise BadEpisode(f"turn {n} is {json_type(step)}; expected an object with an action and an observation",
                             turns)
        if not isinstance(step.get("action"), str):
            raise BadEpisode(f"turn {n}: the action is {json_type(step.get('action'))}, not text", turns)
        turns.append(RecordedTurn(step["action"], step.get("observation"), None))
    return turns
