"""Harbor's reward keys in `report OUTDIR`: the mean of each key of reward.json per cell, as Harbor's
default metric gives it (a key an episode lacks counted 0, failed episodes left out), read from the
scoring turn's breakdown of episodes written by the sweep's own writer; and the failure class
`network` (a verifier that needed the internet), never a model's 0."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.report.cli import write_report
from orchestrator.report.content import CELL_COLUMNS, build_content, reward_key_table
from orchestrator.report.summary import FAILURE_CLASSES, summarize_all
from orchestrator.store import EpisodeKey, EpisodeRecord, TurnRecord
from orchestrator.store.episode_query import FAILURE_CLASSES as FILTER_CLASSES
from orchestrator.store.episode_query import STATUSES
from orchestrator.store.results import load_results
from tests.stores import transcript_store

SET = "my-harbor"
STEPS = [{"name": "step-1", "reward": 1.0, "correctness": 1.0, "verifier_exit": 0, "stopped": False},
         {"name": "step-2", "reward": 0.0, "verifier_exit": 1, "stopped": True}]
ARTIFACTS = [{"path": "/app/out.txt", "step": "step-1", "size": 23, "text": "<b>made</b> by the agent\n",
              "truncated": False},
             {"path": "/app/model.bin", "step": None, "size": 4096, "text": None, "truncated": False}]


def harbor_record(task: int, parts: dict[str, Any] | None, *, status: str = "", failure: str | None = None,
                  model: str = "oracle", env: str = "harbor", task_set: str = SET, submitted: bool = True,
                  early: dict[str, Any] | None = None) -> EpisodeRecord:
    """A Harbor episode as the sweep stores it: a shell turn (with `early` as its breakdown), then
    the scoring turn `submit` with the verifier's reward keys `parts` (its reward `parts["reward"]`,
    else 0); without `submitted`, the shell turn alone. Its status, unless given, as the sweep's."""
    now = time.time()
    reward = float((parts or {}).get("reward", 0.0))
    turns = [TurnRecord("```bash\nmake\n```", "make", "built\n", 0.0, True, early)]
    if submitted:
        turns.append(TurnRecord("", "submit", f"Verifier: reward {reward:g}", reward, True, parts))
    return EpisodeRecord(EpisodeKey(model, "single", task_set, f"{task_set}/{task}", 0), env, task_set, task,
                         f"build the thing {task}", "", "hb/image", 5, now - 1, now,
                         status or ("solved" if reward == 1.0 else "submitted"), failure,
                         "boom" if failure else None, turns=turns)


def harbor_records() -> list[EpisodeRecord]:
    """One cell of Harbor episodes whose keys average to correctness 2/3, performance 1/6 and
    reward 1/3 (over tasks 0, 1 and 2); the others are left out of the means."""
    return [
        harbor_record(0, {"correctness": 1.0, "performance": 0.5, "steps": STEPS, "artifacts": ARTIFACTS},
                      early={"/app/scratch": 1.0}),  # no `reward` key; a breakdown before the submit is not read
        harbor_record(1, {"reward": 1.0, "correctness": 1.0}),  # performance missing: 0
        harbor_record(2, None, status="model_error", failure="model", submitted=False),  # the model's 0s
        harbor_record(3, {"reward": 1.0, "correctness": 1.0, "performance": 1.0}, status="agent_error",
                      failure="agent"),
        harbor_record(4, None, status="verifier_offline", failure="network"),
        harbor_record(5, None, status="verifier_error", failure="verifier"),
        harbor_record(6, {"reward": 1.0, "correctness": 1.0, "performance": 1.0}, status="infra_error",
                      failure="infra"),
        harbor_record(7, {"reward": 1.0, "correctness": 1.0, "performance": 1.0}, status="budget_exhausted"),
    ]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """The Harbor cell, a Harbor cell whose reward.json gave `reward` alone, and a Bash cell whose
    submit turn's breakdown has numbers of its own (the Bash reward's terms, no reward keys)."""
    plain = [harbor_record(n, {"reward": r}, model="plain") for n, r in enumerate((1.0, 0.0))]
    bash = [harbor_record(n, {"file_changes": 0.33, "output_similarity": 0.1}, model="bash", env="bash",
                          task_set="starter-bash") for n in range(2)]
    return transcript_store(tmp_path / "out", "harbor-keys", [*harbor_records(), *plain, *bash])


def cells(outdir: Path) -> dict[str, Any]:
    return {s.model: s for s in summarize_all(load_results(outdir).episodes)}


def test_each_reward_key_is_averaged_over_the_scored_episodes_a_missing_key_counted_zero(store):
    keyed = cells(store)["oracle"].key_means
    assert keyed is not None and keyed.episodes == 3
    assert list(keyed.means) == ["reward", "correctness", "performance"]  # the headline first
    assert keyed.means == pytest.approx({"reward": 1 / 3, "correctness": 2 / 3, "performance": 1 / 6})


def test_no_means_where_no_episode_has_a_key_but_reward_nor_for_other_kinds(store):
    by_model = cells(store)
    assert by_model["plain"].key_means is None and by_model["bash"].key_means is None
    header, rows = reward_key_table(build_content(load_results(store)).summaries)
    assert header == ["model", "strategy", "task set", "scored episodes", "reward", "correctness", "performance"]
    assert rows == [["oracle", "single", SET, "3", "0.33", "0.67", "0.17"]]


def test_the_reports_show_the_means_of_the_keys(store):
    write_report(store)
    md, html = (store / "report.md").read_text(), (store / "report.html").read_text()
    assert "## Mean of each reward key" in md
    assert f"| oracle | single | {SET} | 3 | 0.33 | 0.67 | 0.17 |" in md
    assert '<table id="reward-keys">' in html and "<td>0.67</td><td>0.17</td>" in html


def test_a_report_without_reward_keys_has_no_such_section(tmp_path):
    out = transcript_store(tmp_path / "out", "plain", [harbor_record(0, {"reward": 1.0})])
    write_report(out)
    assert "reward key" not in (out / "report.md").read_text()
    assert 'id="reward-keys"' not in (out / "report.html").read_text()


def test_network_is_a_failure_class_never_a_models_zero(store):
    oracle = cells(store)["oracle"]
    assert "network" in FAILURE_CLASSES and "network fail" in CELL_COLUMNS
    assert oracle.failures["network"] == 1 and oracle.failures["verifier"] == 1
    # Complete: tasks 0-3 and 6 (the budget's cut, the verifier's and the network's left out).
    assert (oracle.episodes, oracle.successes) == (5, 1)
    assert oracle.mean_reward == pytest.approx((0.0 + 1.0 + 0.0 + 1.0 + 1.0) / 5)
    assert "network" in FILTER_CLASSES and "verifier_offline" in STATUSES


def test_a_network_failure_is_no_success_even_at_reward_one():
    record = harbor_record(0, {"reward": 1.0}, status="verifier_offline", failure="network")
    assert record.reward == 1.0 and not record.success
