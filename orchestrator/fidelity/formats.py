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
  the turns after them are the refine round's.
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
    Episode,
    RecordedTurn,
    file_label,
    history_episodes,
    json_type,
    json_value,
    kind_named,
    load_json,
    reward_value,
    shown,
    text_field,
)

SINGLE, TRY_AGAIN, PLAN_AND_SOLVE, REFINE = "Single", "Try Again", "Plan & Solve", "Plan & Solve + refine"
# The strategy of a format whose name does not depend on the run's arguments.
STRATEGY = {REACT: "ReAct", CTF: "CTF", HUMAN: "human"}
KNOWN = ("a JSON object keyed by episode, each with a turn_history (eval_n_turn.py, eval_react.py with "
         "thoughts, eval_ctf.py), an object with meta and logs (eval_plan_solve.py), or human-study records "
         "{query_idx, query, gold, reward, trajectory} (one, or an array or object of them)")


def read_recording(path: Path) -> list[Episode]:
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


def _plan_solve(path: Path, raw: dict[str, Any]) -> list[Episode]:
    meta, logs = raw["meta"], raw["logs"]
    # The refine round ran only with both `--refine` and `--refine_turns`.
    strategy = REFINE if meta.get("refine") and meta.get("refine_turns") else PLAN_AND_SOLVE
    episodes = history_episodes(path, logs, PLAN_SOLVE)
    return [replace(e, strategy=strategy, plan_steps=_plan_steps(path, e, v)) for e, v in zip(episodes, logs.values())]


def _plan_steps(path: Path, episode: Episode, value: dict[str, Any]) -> int:
    steps = value["turn_history"].get("steps", [None] * len(episode.turns))
    if not isinstance(steps, list) or len(steps) > len(episode.turns):
        raise ConfigError(f"{file_label(path)}: episode {shown(episode.key)}: turn_history.steps is "
                          f"{json_value(steps)}; expected a list of the plan's steps, one per turn before the refine "
                          "round")
    return len(steps)


def _human(path: Path, raw: dict[str, Any] | list[Any]) -> list[Episode]:
    if isinstance(raw, dict) and _is_record(raw):  # one record per file, as the environment saved it
        items: list[tuple[str, Any]] = [(str(raw.get("query_idx", 0)), raw)]
    elif isinstance(raw, list):
        items = [(str(i), record) for i, record in enumerate(raw)]
    else:
        items = [(str(key), record) for key, record in raw.items()]
    return [_human_episode(path, key, record) for key, record in items]


def _human_episode(path: Path, key: str, record: dict[str, Any]) -> Episode:
    where = f"{file_label(path)}: episode {shown(key)}"
    kind = kind_named(where, record.get("environment", "ic_sql"))  # the study was of SQL
    reward = reward_value(where, record.get("reward"))
    turns = [_human_turn(f"{where}, turn {n}", step) for n, step in enumerate(record["trajectory"], start=1)]
    if turns:  # the episode's one reward is its last action's (the submit that saved the record)
        turns[-1] = replace(turns[-1], reward=reward)
    return Episode(key, kind, "", record.get("query_idx"), text_field(where, record, "query"), turns,
                   str(path), format=HUMAN, strategy=STRATEGY[HUMAN])


def _human_turn(where: str, step: object) -> RecordedTurn:
    if not isinstance(step, dict):
        raise ConfigError(f"{where} is {json_type(step)}; expected an object with an action and an observation")
    if not isinstance(step.get("action"), str):
        raise ConfigError(f"{where}: the action is {json_type(step.get('action'))}, not text")
    return RecordedTurn(step["action"], step.get("observation"), None)
