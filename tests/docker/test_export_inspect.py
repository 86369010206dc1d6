"""`export --format inspect`: a real sweep's cells as Inspect AI eval logs, read back with inspect_ai's
own reader and checked against the store; without inspect_ai, one line saying how to install it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log, resolve_sample_attachments

from orchestrator.cli import main
from orchestrator.store.transcript import decode
from tests.stores import rows

SWEEP = """name = "inspect-export"
output = "{output}"
strategies = ["single", "try_again"]
epochs = 2
max_turns = 2
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = {{ solve_rate = 0.5, seed = 1 }}
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-sql"
"""


def stored(outdir: Path) -> dict[tuple[str, str, str], list[tuple]]:
    """The store's episodes per cell: (task_id, epoch, reward, success, status, tokens, image_digest)."""
    found = rows(outdir, "SELECT model, strategy, task_set, task_id, epoch, reward, success, status, "
                         "prompt_tokens + completion_tokens, image_digest FROM episodes")
    cells: dict[tuple[str, str, str], list[tuple]] = {}
    for model, strategy, task_set, *episode in found:
        cells.setdefault((model, strategy, task_set), []).append(tuple(episode))
    return cells


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("inspect")
    sweep = root / "sweep.toml"
    sweep.write_text(SWEEP.format(output=root / "out"))
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    assert main(["export", str(root / "out"), "--format", "inspect", "--to", str(root / "logs")]) == 0
    return root / "out", root / "logs"


@pytest.mark.docker
def test_each_cell_is_a_log_whose_samples_and_scores_are_the_stores(exported):
    outdir, logs = exported
    cells = stored(outdir)
    # the files `inspect view` lists
    files = sorted(Path(info.name.removeprefix("file://")) for info in list_eval_logs(str(logs)))
    assert len(files) == len(cells) == 2 * 2 * 2
    seen, task_ids = set(), set()
    for file in files:
        log = read_eval_log(str(file))
        task_ids.add(log.eval.task_id)
        sweep_model = log.eval.metadata["model"]
        cell = (sweep_model, log.eval.solver, log.eval.task)
        episodes = cells[cell]
        seen.add(cell)
        assert log.status == "success" and log.eval.model == {"oracle": "none/oracle"}.get(sweep_model, sweep_model)
        assert len(log.samples) == len(episodes) == 5 * 2  # five tasks, two epochs
        by_id = {(task_id, epoch + 1): rest for task_id, epoch, *rest in episodes}
        for sample in log.samples:
            reward, success, status, tokens, digest = by_id.pop((sample.id, sample.epoch))
            assert sample.scores["reward"].value == reward
            assert sample.scores["success"].value == success
            assert (sample.metadata["status"], sample.metadata["image_digest"]) == (status, digest)
            assert sum(u.total_tokens for u in sample.model_usage.values()) == tokens
        assert by_id == {}
        success, reward = log.results.scores
        assert success.metrics["accuracy"].value == pytest.approx(sum(e[3] for e in episodes) / len(episodes))
        assert reward.metrics["mean"].value == pytest.approx(sum(e[2] for e in episodes) / len(episodes))
        if sweep_model == "oracle":
            assert success.metrics["accuracy"].value == 1.0
    assert seen == set(cells)
    assert len(task_ids) == len(files)  # `inspect view` lists only the last log of a task_id, the rest as retries
    rates = {cell: sum(e[3] for e in episodes) / len(episodes) for cell, episodes in cells.items()}
    assert 0 < min(rates.values()) < 1 == max(rates.values()), rates  # the simulated model fails some: not all 1.0


@pytest.mark.docker
def test_a_sample_holds_the_transcript_and_every_call_as_a_model_event(exported):
    outdir, logs = exported
    log = read_eval_log(str(logs / "openai-sim__try_again__starter-sql.eval"))
    db = sqlite3.connect(outdir / "results.db")
    try:
        for stored in log.samples:
            sample = resolve_sample_attachments(stored, "full")  # the log keeps a long text once, as an attachment
            body, fmt, eid = db.execute(
                "SELECT t.body, t.format, e.id FROM transcripts t JOIN episodes e ON e.id = t.episode_id WHERE "
                "e.model = 'openai/sim' AND e.strategy = 'try_again' AND e.task_set = 'starter-sql' AND e.task_id = ? "
                "AND e.epoch = ?", (sample.id, sample.epoch - 1)).fetchone()
            turns = db.execute("SELECT action, reward FROM turns WHERE episode_id = ? ORDER BY idx", (eid,)).fetchall()
            calls = decode(body, fmt).calls
            events = [e for e in sample.events if e.event == "model"]
            assert [[(m.role, m.text) for m in e.input] for e in events] == [
                [(m["role"], m["content"]) for m in c.sent] for c in calls]  # what each call sent, as it was
            assert [e.output.message.text for e in events] == [c.answer["content"] for c in calls]
            assert sample.messages[0].role == "system" and sample.messages[1].text == calls[0].sent[1]["content"]
            answers = [m for m in sample.messages if m.role == "assistant"]
            assert [t["action"] for m in answers for t in (m.metadata or {}).get("turns", [])] == [a for a, _ in turns]
    finally:
        db.close()
