"""Transcripts: every message each model call sent, stored once per distinct message, read back whole.

The unit tests check the encoding (a growing, windowed dialogue stores no prefix twice; an edited
message is a new one; turns find the answers that produced them). The sweep test runs real
episodes against the scripted LLM server over real HTTP and checks each call's stored messages
and tools against what the server received, and each kind's reward breakdown; a sweep with
`transcripts = false` stores none, and an older store opens with "no transcript stored".
"""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from agents.llm.server import Rule, ScriptedLLMServer, ServerConfig
from foundation.settings import PROJECT_ROOT
from orchestrator.store.transcript import decode
from tests.stores import rows
from tests.processes import ended_async

SWEEP = """name = "transcripts"
strategies = ["try_again_fenced", "tools"]
max_turns = 3
concurrency = 8
transcripts = {keep}
[[models]]
name = "openai/scripted"
api_base = "{base}/v1"
api_key_env = "TRANSCRIPT_TEST_KEY"
[[tasks]]
dataset = "starter-bash"
limit = 2
[[tasks]]
dataset = "starter-sql"
limit = 2
[[tasks]]
dataset = "starter-python"
limit = 2
[[tasks]]
dataset = "starter-ctf"
limit = 2
"""


ONE_TASK = '[[tasks]]\ndataset = "starter-bash"\nlimit = 1\n'


@pytest.mark.docker
async def test_a_sweep_stores_what_each_call_sent_and_each_kinds_reward_parts(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSCRIPT_TEST_KEY", "sk-test-transcripts")
    config = ServerConfig(default_answer="Let me look.\n```bash\nls /\n```", rules=[  # an action of each kind
        Rule(pattern=r"^(Task|Output):", answer="```bash\nsubmit picoCTF{not_it}\n```"),
        Rule(pattern="SQL", answer="```sql\nSELECT 1\n```"),
        Rule(pattern="PYTHON", answer="```python\ndef first(x):\n    return x\n```")])
    async with ScriptedLLMServer(config) as server:
        for keep in ("true", "false"):
            text = SWEEP.format(keep=keep, base=server.base_url)
            (tmp_path / f"{keep}.toml").write_text(text if keep == "true" else text.split("[[tasks]]")[0] + ONE_TASK)
            sweep = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orchestrator", "sweep", str(tmp_path / f"{keep}.toml"), "--output",
                str(tmp_path / keep), "--quiet", cwd=PROJECT_ROOT, stderr=asyncio.subprocess.PIPE)
            _, err = await ended_async(sweep, 600, log=tmp_path / keep / "sweep.log")
            assert sweep.returncode == 0, err.decode()[-2000:]
            if keep == "true":  # what the first sweep's calls sent, as the server received it
                seen = sorted(_sent(r.body["messages"], r.body.get("tools")) for r in server.requests)
    stored = sorted(_sent(call.sent, call.tools) for body, fmt in rows(tmp_path / "true", "SELECT body, format "
                                                                           "FROM transcripts")
                    for call in decode(body, fmt).calls)
    assert stored == seen and len(seen) == rows(tmp_path / "true", "SELECT count(*) FROM llm_calls")[0][0] > 16
    assert rows(tmp_path / "false", "SELECT count(*) FROM transcripts") == [(0,)]
    parts = {env: set(json.loads(b)) for env, b in rows(tmp_path / "true", "SELECT e.env, t.breakdown FROM turns t "
                                                        "JOIN episodes e ON e.id = t.episode_id WHERE t.breakdown "
                                                        "IS NOT NULL")}
    assert {"file_changes", "file_contents", "output_similarity"} <= parts["bash"]
    assert {"iou", "kendall_tau", "agent_rows", "gold_rows"} <= parts["sql"]
    assert {"function", "tests", "passed"} <= parts["python"] or "reason" in parts["python"]
    assert {"flag_correct", "submitted"} <= parts["ctf"]
    # Each turn's timing as it was made: its call (a turn of the sweep's own closing `submit` has
    # none), when it began and how long it took, its spans; and when each call began.
    timed = rows(tmp_path / "true", "SELECT t.call_idx, t.started_s, t.duration_s, t.spans, t.output, "
                 "(SELECT count(*) FROM llm_calls c WHERE c.episode_id = t.episode_id) FROM turns t")
    assert timed and all(spans is not None and start is not None and took >= 0 for _, start, took, spans, _, _ in timed)
    assert all(call is not None and 0 <= call < calls for call, _, _, _, output, calls in timed if output)
    kinds = {kind for *_, spans, _, _ in timed for kind, _, _ in json.loads(spans)}
    assert kinds == {"call", "action", "reward"}, kinds
    assert rows(tmp_path / "true", "SELECT count(*) FROM llm_calls WHERE started_s IS NULL OR started_s < 0") == [(0,)]


def _sent(messages: list, tools: list | None) -> str:
    return json.dumps([messages, tools], sort_keys=True)
