"""A store written before a column was added (the episode's `host`) opens, gains the column, keeps
its rows, and stores the new field from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.store import EpisodeKey, EpisodeRecord, Store
from orchestrator.store.store import SCHEMA


def episode(index: int, host: str | None) -> EpisodeRecord:
    return EpisodeRecord(EpisodeKey("oracle", "single", "starter-bash", f"starter-bash/{index}", 0), env="bash",
                         dataset="starter-bash", task_index=index, query="q", gold="g", image="img", max_turns=1,
                         started_at=1.0, finished_at=2.0, status="solved", host=host)


async def test_an_older_store_gains_the_host_column_and_keeps_its_rows(tmp_path: Path) -> None:
    # The store as the commit before `host` made it: the schema without that line, one episode in it.
    old_schema = "\n".join(line for line in SCHEMA.read_text().splitlines() if not line.strip().startswith("host "))
    assert old_schema != SCHEMA.read_text()
    async with Store.open(tmp_path, sweep="s", identity="i") as store:
        run = await store.start_run(sweep="s", identity="i", sweep_hash="h", git_sha=None, config_json="{}")
    db = sqlite3.connect(tmp_path / "results.db")
    db.executescript("DROP TABLE llm_calls; DROP TABLE turns; DROP TABLE episodes;" + old_schema)
    columns = [row[1] for row in db.execute("PRAGMA table_info(episodes)")]
    assert "host" not in columns
    db.execute("INSERT INTO episodes (run_id, sweep, model, strategy, task_set, task_id, epoch, env, dataset, "
               "task_index, query, gold, status, reward, success, n_turns, max_turns, attempts, image, started_at, "
               "finished_at) VALUES (?, 's', 'oracle', 'single', 'starter-bash', 'starter-bash/0', 0, 'bash', "
               "'starter-bash', 0, 'q', 'g', 'solved', 1.0, 1, 1, 1, 1, 'img', 1.0, 2.0)", (run,))
    db.commit()
    db.close()

    async with Store.open(tmp_path, sweep="s", identity="i") as store:
        await store.add_episode(run, "s", episode(1, "intercode_host_2"))
    db = sqlite3.connect(tmp_path / "results.db")
    try:
        rows = db.execute("SELECT task_id, host FROM episodes ORDER BY task_id").fetchall()
    finally:
        db.close()
    assert rows == [("starter-bash/0", None), ("starter-bash/1", "intercode_host_2")]
