"""Agents of your own in sweeps, as a user runs them (`python -m orchestrator sweep FILE`): the
example's sweep file as it is; an agent written against the OpenAI SDK with the local simulated
model, its every call stored with tokens and latency and in the transcript; a resume that runs
nothing; a changed agent file refused to the old results; an agent that raises costs its own
episodes (agent errors, never re-run); a file that does not import is one line, nothing claimed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.report.summary import summarize_all
from orchestrator.store.results import load_results
from tests.stores import rows
from tests.unit.test_own_agents import OPENAI_AGENT

pytestmark = pytest.mark.docker
EXAMPLE = PROJECT_ROOT / "examples" / "own-agent"


def sweep(tmp_path: Path, strategies: list[str], models: str = '[[models]]\nname = "oracle"\n',
          tasks: str = '[[tasks]]\ndataset = "starter-bash"\n') -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(f'name = "agents"\noutput = "{tmp_path / "out"}"\nstrategies = {json.dumps(strategies)}\n'
                    f'max_turns = 4\n{models}\n{tasks}')
    return path


def test_the_examples_sweep_runs_as_it_is(tmp_path, capsys):
    assert main(["sweep", str(EXAMPLE / "sweep.toml"), "--output", str(tmp_path / "out"), "--quiet"]) == 0
    cells = {(s.model, s.strategy, s.task_set): s for s in summarize_all(load_results(tmp_path / "out").episodes)}
    mine = {key: cell for key, cell in cells.items() if key[1] == "my_agent.py:Terse"}
    assert len(mine) == 8 and all(cell.failures["agent"] == 0 for cell in mine.values())
    assert all(cell.success_rate == 1.0 for (model, _, _), cell in mine.items() if model == "oracle")
    for (model, _, task_set), cell in mine.items():  # the same model gives both strategies the same tasks
        assert cell.successes == cells[model, "try_again", task_set].successes
    calls = rows(tmp_path / "out", "SELECT c.prompt_tokens, c.latency_s FROM llm_calls c JOIN episodes e ON "
                                   "e.id = c.episode_id WHERE e.strategy = 'my_agent.py:Terse'")
    assert calls and all(tokens > 0 and latency > 0 for tokens, latency in calls)


def test_an_sdk_agent_with_the_local_model_is_recorded_and_resumed(tmp_path, capsys):
    (tmp_path / "sdk_agent.py").write_text(OPENAI_AGENT.replace("STREAM", "True"))
    models = '[[models]]\nname = "openai/sim"\nlocal = { latency = 0.01, solve_rate = 1.0, seed = 3 }\n'
    path = sweep(tmp_path, ["sdk_agent.py:A"], models)
    assert main(["sweep", str(path), "--quiet"]) == 0
    out = tmp_path / "out"
    found = rows(out, "SELECT status, id FROM episodes")
    assert [status for status, _ in found] == ["solved"] * 5
    calls = rows(out, "SELECT episode_id, prompt_tokens, completion_tokens, latency_s FROM llm_calls")
    assert {episode for episode, *_ in calls} == {episode for _, episode in found}
    assert all(prompt > 0 and completion > 0 and latency > 0 for _, prompt, completion, latency in calls)
    assert rows(out, "SELECT count(*) FROM transcripts")[0][0] == 5
    capsys.readouterr()
    assert main(["sweep", str(path), "--quiet"]) == 0  # a resume: everything is stored
    assert "0 this run" in capsys.readouterr().err
    (tmp_path / "sdk_agent.py").write_text(OPENAI_AGENT.replace("STREAM", "False"))
    assert main(["sweep", str(path), "--quiet"]) == 2  # another agent: not the old results' sweep
    assert "different sweep" in capsys.readouterr().err


def test_an_agent_that_raises_costs_its_own_episodes(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("async def run(episode, model):\n    await episode.step('true')\n"
                                        "    raise RuntimeError('lost my way')\n")
    path = sweep(tmp_path, ["try_again", "broken.py:run"])
    assert main(["sweep", str(path), "--quiet"]) == 0
    found = rows(tmp_path / "out", "SELECT strategy, status, failure_class, error, attempts FROM episodes")
    mine = [row for row in found if row[0] == "broken.py:run"]
    assert len(mine) == 5 and all(row[1:3] == ("agent_error", "agent") and row[4] == 1 for row in mine)
    assert all("broken.py:3 in run of broken.py:run raised RuntimeError: lost my way" in row[3] for row in mine)
    assert all(status == "solved" for strategy, status, *_ in found if strategy == "try_again")
    turns = rows(tmp_path / "out", "SELECT count(*) FROM turns t JOIN episodes e ON e.id = t.episode_id "
                                   "WHERE e.status = 'agent_error'")
    assert turns == [(5,)]  # the step it took before raising is kept
    report = (tmp_path / "out" / "report.md").read_text()
    assert "agent fail" in report


def test_an_agent_file_that_does_not_import_is_one_line_and_claims_nothing(tmp_path, capsys):
    (tmp_path / "bad.py").write_text("def run(episode, model)\n    pass\n")
    path = sweep(tmp_path, ["bad.py:run"])
    assert main(["sweep", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: agent 'bad.py:run': bad.py:1 does not import: SyntaxError: expected ':' (bad.py, line 1)"]
    assert not (tmp_path / "out" / "results.db").exists()  # no store claimed
