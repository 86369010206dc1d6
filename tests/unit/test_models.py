"""The models: LLMModel over the scripted server, the oracle and replay through a real strategy,
and resolve_model's one-line refusals, which come before any container exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from agents import LLMModel, OracleModel, get_strategy
from agents.llm import LLMClient, ModelSpec
from agents.llm.server import Rule, ScriptedLLMServer, ServerConfig
from foundation.errors import ConfigError
from orchestrator.fidelity.replay_model import ReplayModel
from orchestrator.sweep.sweep_models import resolve_model
from tasks import Task, load_tasks


def first(kind: str) -> Task:
    return load_tasks(f"starter-{kind}")[0]


def trajectory(tmp_path: Path, task: Task, actions: list[str], *, task_id: object = 0) -> Path:
    """A one-episode file in the original's format (as its ic_sql runs wrote them)."""
    episode = {"environment": f"ic_{task.kind}", "dataset": "sql.json", "task_id": task_id, "query": task.query,
               "turn_history": {"actions": actions, "observations": [""] * len(actions),
                                "rewards": [0.0] * len(actions), "valid_action": [True] * len(actions)}}
    path = tmp_path / "trajectories.json"
    path.write_text(json.dumps({"0": episode}))
    return path


# ---------------------------------------------------------------- no Docker

async def test_llm_model_returns_the_completion_text():
    rules = [Rule(pattern="bookshop", answer="```sql\nSELECT 2\n```")]
    async with ScriptedLLMServer(ServerConfig(rules=rules)) as server:
        client = LLMClient([ModelSpec(name="openai/fake", api_base=f"{server.base_url}/v1", api_key=SecretStr("k"))])
        model = LLMModel(client, "openai/fake", temperature=0)
        text = await model.complete([{"role": "user", "content": "the bookshop db"}], task=first("sql"), turn=0)
    assert text == "```sql\nSELECT 2\n```"
    assert model.name == "openai/fake"
    assert server.requests[0].body is not None and server.requests[0].body["temperature"] == 0


async def test_oracle_answers_the_gold_in_the_kinds_fence():
    oracle = OracleModel()
    sql, python, ctf = first("sql"), first("python"), first("ctf")
    assert await oracle.complete([], task=sql, turn=0) == f"```sql\n{sql.gold_text}\n```"
    assert await oracle.complete([], task=sql, turn=1) == "```sql\nsubmit\n```"
    assert (await oracle.complete([], task=python, turn=1)).startswith("```python\nsubmit sum_even_squares")
    assert await oracle.complete([], task=ctf, turn=0) == f"```bash\nsubmit {ctf.gold_text}\n```"


async def test_replay_plays_the_episode_of_the_task_turn_by_turn(tmp_path: Path):
    task = first("sql")
    model = ReplayModel(trajectory(tmp_path, task, ["SELECT 1", task.gold_text, "submit"]))
    answers = [await model.complete([], task=task, turn=n) for n in range(4)]
    assert answers == ["```sql\nSELECT 1\n```", f"```sql\n{task.gold_text}\n```", "```sql\nsubmit\n```",
                       "```sql\nsubmit\n```"]  # past the recording: submit
    other = load_tasks("starter-sql")[1]
    assert await model.complete([], task=other, turn=0) == "```sql\nsubmit\n```"  # not in the file


async def test_replay_finds_the_episode_by_query_when_the_index_disagrees(tmp_path: Path):
    task = load_tasks("starter-sql")[2]
    model = ReplayModel(trajectory(tmp_path, task, [task.gold_text], task_id=999))
    assert await model.complete([], task=task, turn=0) == f"```sql\n{task.gold_text}\n```"


# ---------------------------------------------------------------- resolve_model

def client() -> LLMClient:
    return LLMClient([ModelSpec(name="openai/local", api_base="http://127.0.0.1:9/v1", api_key=SecretStr("x"))])


def one_line_error(name: str) -> str:
    with pytest.raises(ConfigError) as caught:
        resolve_model(name, client=client())
    message = str(caught.value)
    assert "\n" not in message and message
    return message


def test_resolve_model_names(tmp_path: Path):
    assert isinstance(resolve_model("oracle", client=client()), OracleModel)
    path = trajectory(tmp_path, first("sql"), ["SELECT 1"])
    assert isinstance(resolve_model(f"replay:{path}", client=client()), ReplayModel)
    assert isinstance(resolve_model("openai/local", client=client()), LLMModel)


def test_resolve_model_refusals_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-printed")
    assert "unknown model 'gpt-99-turbo'" in one_line_error("gpt-99-turbo")
    assert "unknown model" in one_line_error("nosuchprovider/model")
    missing = one_line_error("gpt-4o")
    assert "OPENAI_API_KEY" in missing and "never-printed" not in missing
    assert "does not exist" in one_line_error(f"replay:{tmp_path / 'none.json'}")
    assert "replay needs a trajectory file" in one_line_error("replay:")
    with pytest.raises(ConfigError, match="^unknown strategy 'tree_of_thought'; known: "):
        get_strategy("tree_of_thought")


def test_resolve_model_accepts_a_real_provider_with_its_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    assert isinstance(resolve_model("gpt-4o", client=client()), LLMModel)
