"""Stored episodes written out as Inspect AI eval logs: `export --format inspect`.

One `.eval` log per model × strategy × task set, built from inspect_ai's own log types and written
by `inspect_ai.log.write_eval_log`, so `inspect view DIR` opens them and `read_eval_log` reads
them back. inspect_ai is an optional extra (`intercode-orchestrator[inspect]`): this module imports
it at the top, and only `export --format inspect` imports this module.

How a cell becomes a log:
- task: the task set; solver: the strategy; model: the sweep's model in Inspect's provider/name
  shape (see `inspect_model`), the sweep's own name kept in the log's metadata.
- One sample per episode: id = the task id and epoch = the episode's epoch + 1 (Inspect counts
  from 1); input = the query, target = the gold; messages = the episode's transcript (every
  message the model saw, in order; each call a ModelEvent with the messages it sent, its tools
  and its answer: inspect_transcript.py), or, in a store without one, the query, then per turn the
  model's answer (its action as a tool call named after the environment) and the observation (the
  tool's reply; a user message when the answer held no action); scores `success` (1 or 0) and
  `reward` (the best reward over the turns); metadata = status, failure class, error, image and
  digest, served model; model usage = the tokens of the episode's LLM calls.
- Results: `success` with `accuracy` (the success rate) and `reward` with `mean`, counted as the
  report counts them: an episode cut short by the budget is incomplete, a sample without scores.
- An infrastructure failure is a sample with an `error`, scored as a failure (the report keeps it
  in the denominator); the log still succeeds, as Inspect's own do when errors don't stop the
  eval. The log's status is the sweep's: success when its last run finished, started while one
  runs, cancelled when it was interrupted, error when it failed.
"""

from __future__ import annotations

import hashlib
import operator
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path

from inspect_ai.log import (EvalConfig, EvalDataset, EvalError, EvalLog, EvalMetric, EvalPlan, EvalPlanStep,
                            EvalResults, EvalSample, EvalScore, EvalSpec, EvalStats, EvalStatus, write_eval_log)
from inspect_ai.model import (ChatCompletionChoice, ChatMessage, ChatMessageAssistant, ChatMessageTool,
                              ChatMessageUser, ModelOutput, ModelUsage)
from inspect_ai.event import Event
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall

from foundation.outcome import Status
from orchestrator.store.export import safe_name
from orchestrator.store.inspect_transcript import conversation, model_events
from orchestrator.store.reader import read_only
from orchestrator.store.transcript import StoredTranscript, decode

Cell = tuple[str, str, str]  # (model, strategy, task_set)
LOG_STATUS: dict[str, EvalStatus] = {  # the last run's status -> the log's
    "finished": "success", "running": "started", "interrupted": "cancelled", "failed": "error"}
CUT = Status.BUDGET_EXHAUSTED  # an episode the sweep's budget cut short: incomplete, as the report counts it
NO_MODEL = {"oracle": "none/oracle", "replay": "none/replay"}  # models that make no LLM call
_EPISODE_COLUMNS = ("id, task_id, epoch, env, dataset, task_index, query, gold, status, failure_class, error, "
                    "reward, success, n_turns, max_turns, prompt_tokens, completion_tokens, cost_usd, attempts, "
                    "image, image_digest, served_model, started_at, finished_at")


@dataclass(frozen=True)
class Sweep:
    """What every log of a sweep shares: its name and identity, when it began, where it is."""

    name: str
    identity: str
    created: float
    status: EvalStatus
    git_sha: str | None


def export_inspect(outdir: Path, target: Path) -> list[Path]:
    """Write one `.eval` log per cell under `target`, a cell at a time; returns their paths."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    with read_only(outdir) as db:
        db.row_factory = sqlite3.Row
        sweep = _sweep(db)
        for cell in _cells(db):
            path = target / ("__".join(safe_name(part) for part in cell) + ".eval")
            write_eval_log(_log(db, sweep, cell), path, format="eval")
            written.append(path)
    return written


def episode_sample(db: sqlite3.Connection, episode_id: int) -> EvalSample | None:
    """One stored episode as an Inspect sample, as `export --format inspect` writes it in its cell's
    log (None: no such episode)."""
    db.row_factory = sqlite3.Row
    try:
        e = db.execute(f"SELECT {_EPISODE_COLUMNS}, model FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if e is None:
            return None
        turns = db.execute("SELECT * FROM turns WHERE episode_id = ? ORDER BY idx", (episode_id,)).fetchall()
        stored = _cell_calls(db, (e["model"], "", ""), episode_id).get(episode_id)
        return _sample(inspect_model(e["model"]), e, turns, stored)
    finally:
        db.row_factory = None


def inspect_model(model: str) -> str:
    """The sweep's model as Inspect names one, `provider/name`: a litellm name with a provider stays
    as it is, a bare one becomes `litellm/NAME`; `oracle` and `replay:FILE`, which call no model,
    become `none/oracle` and `none/replay`."""
    kind = model.partition(":")[0]
    if kind in NO_MODEL:
        return NO_MODEL[kind]
    return model if "/" in model else f"litellm/{model}"


def _sweep(db: sqlite3.Connection) -> Sweep:
    meta = {row["key"]: row["value"] for row in db.execute("SELECT key, value FROM meta")}
    first, last = (db.execute(f"SELECT started_at, status, git_sha FROM runs ORDER BY id {order} LIMIT 1").fetchone()
                   for order in ("ASC", "DESC"))
    return Sweep(name=meta.get("sweep", ""), identity=meta.get("identity", ""),
                 created=first["started_at"] if first else 0.0,
                 status=LOG_STATUS.get(last["status"], "error") if last else "error",
                 git_sha=last["git_sha"] if last else None)


def _cells(db: sqlite3.Connection) -> list[Cell]:
    rows = db.execute("SELECT DISTINCT model, strategy, task_set FROM episodes ORDER BY 1, 2, 3")
    return [(row[0], row[1], row[2]) for row in rows]


def _log(db: sqlite3.Connection, sweep: Sweep, cell: Cell) -> EvalLog:
    model, strategy, task_set = cell
    name = inspect_model(model)
    episodes = db.execute(f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE model = ? AND strategy = ? AND task_set = ? "
                          "ORDER BY dataset, task_index, epoch", cell).fetchall()
    turns: dict[int, list[sqlite3.Row]] = defaultdict(list)
    for row in db.execute("SELECT t.* FROM turns t JOIN episodes e ON e.id = t.episode_id WHERE e.model = ? "
                          "AND e.strategy = ? AND e.task_set = ? ORDER BY t.episode_id, t.idx", cell):
        turns[row["episode_id"]].append(row)
    calls = _cell_calls(db, cell)
    samples = [_sample(name, e, turns[e["id"]], calls.get(e["id"])) for e in episodes]
    usage = [u for s in samples for u in s.model_usage.values()]
    task_ids = list(dict.fromkeys(e["task_id"] for e in episodes))  # in the task sets' order
    spec = EvalSpec(
        eval_id=_digest(sweep.identity, *cell), run_id=_digest(sweep.identity), created=_utc(sweep.created),
        # `inspect view` takes logs of one task_id in one directory for retries and lists only the last
        task=task_set, task_id=_digest("task", sweep.identity, *cell), solver=strategy, model=name, tags=[strategy],
        dataset=EvalDataset(name=task_set, samples=len(task_ids), sample_ids=task_ids),
        config=EvalConfig(epochs=1 + max(e["epoch"] for e in episodes)),
        metadata={"sweep": sweep.name, "model": model, "strategy": strategy, "task_set": task_set,
                  "git_sha": sweep.git_sha})
    return EvalLog(
        status=sweep.status, eval=spec,
        plan=EvalPlan(steps=[EvalPlanStep(solver=strategy,
                                          params={"max_turns": max(e["max_turns"] for e in episodes)})]),
        results=_results(episodes),
        stats=EvalStats(started_at=_utc(min(e["started_at"] for e in episodes)),
                        completed_at=_utc(max(e["finished_at"] for e in episodes)),
                        model_usage={name: reduce(operator.add, usage)} if usage else {}),
        samples=samples)


def _results(episodes: list[sqlite3.Row]) -> EvalResults:
    """Success rate and mean reward over the complete episodes (those the budget cut are left out)."""
    done = [e for e in episodes if e["status"] != CUT]
    scores = []
    if done:
        scored, unscored = len(done), len(episodes) - len(done)
        rate = sum(e["success"] for e in done) / len(done)
        mean = sum(e["reward"] for e in done) / len(done)
        scores = [EvalScore(name="success", scorer="success", scored_samples=scored, unscored_samples=unscored,
                            metrics={"accuracy": EvalMetric(name="accuracy", value=rate)}),
                  EvalScore(name="reward", scorer="reward", scored_samples=scored, unscored_samples=unscored,
                            metrics={"mean": EvalMetric(name="mean", value=mean)})]
    return EvalResults(total_samples=len(episodes), completed_samples=len(done), scores=scores)


def _cell_calls(db: sqlite3.Connection, cell: Cell,
                episode_id: int | None = None) -> dict[int, tuple[StoredTranscript, list[ModelUsage]]]:
    """The transcripts of a cell's episodes (or of the one episode `episode_id`), with each call's
    usage (none in a store without them)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'transcripts'").fetchone() is None:
        return {}
    where, args = ("e.id = ?", (episode_id,)) if episode_id is not None else \
        ("e.model = ? AND e.strategy = ? AND e.task_set = ?", cell)
    usage: dict[int, list[ModelUsage]] = defaultdict(list)
    for row in db.execute("SELECT c.episode_id, c.prompt_tokens, c.completion_tokens, c.cost_usd FROM llm_calls c "
                          f"JOIN episodes e ON e.id = c.episode_id WHERE {where} ORDER BY c.episode_id, c.idx", args):
        usage[row[0]].append(ModelUsage(input_tokens=row[1], output_tokens=row[2], total_tokens=row[1] + row[2],
                                        total_cost=row[3]))
    found = {}
    for eid, fmt, body in db.execute("SELECT t.episode_id, t.format, t.body FROM transcripts t JOIN episodes e ON "
                                     f"e.id = t.episode_id WHERE {where}", args):
        found[eid] = (decode(body, fmt), usage.get(eid, []))
    return found


def _sample(model: str, e: sqlite3.Row, turns: list[sqlite3.Row],
            stored: tuple[StoredTranscript, list[ModelUsage]] | None = None) -> EvalSample:
    events: list[Event] = []
    if stored is None:
        messages = _messages(model, e["env"], e["query"], turns)
    else:
        transcript, usage = stored
        messages = conversation(model, transcript, turns)
        per_call = usage if len(usage) == len(transcript.calls) else [None] * len(transcript.calls)
        events.extend(model_events(model, transcript, per_call, datetime.fromtimestamp(e["started_at"], UTC)))
    answers = [m for m in messages if isinstance(m, ChatMessageAssistant)]
    total = ModelUsage(input_tokens=e["prompt_tokens"], output_tokens=e["completion_tokens"],
                       total_tokens=e["prompt_tokens"] + e["completion_tokens"], total_cost=e["cost_usd"])
    return EvalSample(
        id=e["task_id"], epoch=e["epoch"] + 1, input=e["query"], target=e["gold"], messages=messages,
        output=ModelOutput(model=model, choices=[ChatCompletionChoice(message=answers[-1])] if answers else [],
                           usage=total),
        scores=_scores(e, turns),
        metadata={key: e[key] for key in ("status", "failure_class", "error", "env", "dataset", "task_index",
                                          "n_turns", "max_turns", "attempts", "image", "image_digest", "served_model")},
        model_usage={model: total} if e["prompt_tokens"] or e["completion_tokens"] else {},
        started_at=_utc(e["started_at"]), completed_at=_utc(e["finished_at"]), events=events,
        total_time=e["finished_at"] - e["started_at"],
        error=EvalError(message=e["error"] or e["status"], traceback="", traceback_ansi="")
        if e["failure_class"] == "infra" else None)


def _scores(e: sqlite3.Row, turns: list[sqlite3.Row]) -> dict[str, Score] | None:
    """`success` and `reward`; none for an episode the budget cut (incomplete, in no rate)."""
    if e["status"] == CUT:
        return None
    # the answer: the action of the first turn with the best reward, not a closing `submit`
    best = max((t for t in turns if t["action"]), key=lambda t: t["reward"], default=None)
    return {"success": Score(value=float(e["success"]), answer=best["action"] if best else None,
                             explanation=e["status"]),
            "reward": Score(value=e["reward"])}


def _messages(model: str, env: str, query: str, turns: list[sqlite3.Row]) -> list[ChatMessage]:
    """The query, then each turn: the model's answer (its action as a tool call) and the observation."""
    messages: list[ChatMessage] = [ChatMessageUser(content=query)]
    for turn in turns:
        call = f"turn-{turn['idx']}"
        tool_calls = [ToolCall(id=call, function=env, arguments={"code": turn["action"]})] if turn["action"] else None
        messages.append(ChatMessageAssistant(content=turn["output"], model=model, tool_calls=tool_calls,
                                             metadata={"reward": turn["reward"], "executed": bool(turn["executed"])}))
        messages.append(ChatMessageTool(content=turn["observation"], tool_call_id=call, function=env)
                        if tool_calls else ChatMessageUser(content=turn["observation"]))
    return messages


def _digest(*parts: str) -> str:
    """A stable id, so exporting the same store twice gives the same logs."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:22]


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()
