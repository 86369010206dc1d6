"""An episode's page draws its timeline from the turns' stored spans, puts each turn with the call
its record names (not the call whose answer reads the same), marks an answer the strategy rewrote,
and offers the episode as JSON and as an Inspect sample. A store written before turns were timed
shows its page as before, without a timeline."""

from __future__ import annotations

import json
import time
from pathlib import Path


from orchestrator.store import EpisodeKey, EpisodeRecord, LLMCall, TurnRecord
from orchestrator.store.transcript import Transcript
from tests.unit.test_view import get, viewer, writer

ANSWER = "```bash\nls\n```"


def timed_record(*, timed: bool = True) -> EpisodeRecord:
    """Two calls that answered alike, two turns, both the first call's (its answer called two
    tools, say), as their records say: matching by text would give the second to the second call.
    The first answer was rewritten."""
    now = time.time()
    spans = [[["call", 0.0, 1.5], ["action", 1.5, 0.25], ["reward", 1.75, 0.05]],
             [["call", 2.0, 0.5], ["action", 2.5, 0.125], ["reward", 2.625, 0.05]]]
    turns = [TurnRecord(ANSWER, "ls", "a.txt\n", 0.5, True, None, *(
        (s[0][1], s[-1][1] + s[-1][2] - s[0][1], 0, s) if timed else (None, None, None, None)),
        rewritten="ls" if i == 0 else None) for i, s in enumerate(spans)]
    calls = [LLMCall("demo-model", "demo-0613", 100, 10, 0.5, 1, 0.0002, started_s=s[0][1] if timed else None)
             for s in spans]
    transcript = Transcript()
    transcript.record([{"role": "user", "content": "list the files"}], {"role": "assistant", "content": ANSWER})
    transcript.record([{"role": "user", "content": "list the files"}, {"role": "assistant", "content": "ls"},
                       {"role": "user", "content": "Reward: 0.5, again"}], {"role": "assistant", "content": ANSWER})
    return EpisodeRecord(EpisodeKey("demo-model", "try_again", "starter-bash", "starter-bash/0", 0), "bash",
                         "starter-bash", 0, "list the files", "ls", "intercode/starter", 5, now - 3, now, "max_turns",
                         turns=turns, calls=calls, transcript=transcript)


async def test_the_timeline_the_call_of_each_turn_and_the_rewritten_answer_are_shown(tmp_path: Path):
    out = tmp_path / "timed"
    async with writer(out) as (store, run):
        await store.add_episode(run, "written", timed_record())
    async with viewer(out) as (_, client):
        page = await get(client, "/s/0/episodes/1")
    timeline = page.split('id="timeline"', 1)[1].split("<h2>", 1)[0].split("</p>", 1)[1]  # the rows, past the legend
    assert timeline.count('class="tl-row"') == 2 and timeline.count("<rect class=\"tl-call\"") == 2
    assert timeline.count('class="tl-action"') == 2 and timeline.count('class="tl-reward"') == 2
    assert "1.80 s: model call 1.50 s · action 250 ms · scoring 50 ms" in page
    second_call = page.split('id="call-2"', 1)[1]
    assert 'id="turn-' not in second_call and "no turn: this answer ran nothing" in second_call
    first_call = page.split('id="call-1"', 1)[1].split('id="call-2"', 1)[0]
    assert 'id="turn-1"' in first_call and 'id="turn-2"' in first_call, "both turns are call 1's, as stored"
    assert "<strong>rewritten</strong>" in first_call and "kept instead" in first_call
    assert page.count("<strong>rewritten</strong>") == 1
    assert "Transcript (2 turns)" in page
    assert "/s/0/episodes/1?format=json" in page and "/s/0/episodes/1?format=inspect" in page


async def test_the_episode_downloads_as_json_and_as_an_inspect_sample(tmp_path: Path):
    out = tmp_path / "timed"
    async with writer(out) as (store, run):
        await store.add_episode(run, "written", timed_record())
    async with viewer(out) as (_, client):
        async with client.get("/s/0/episodes/1?format=json") as response:
            assert response.status == 200
            assert "attachment" in response.headers["Content-Disposition"]
            body = json.loads(await response.text())
        async with client.get("/s/0/episodes/1?format=inspect") as response:
            assert response.status == 200
            from inspect_ai.log import EvalSample

            sample = EvalSample.model_validate_json(await response.text())
        refused = await get(client, "/s/0/episodes/1?format=xml", 400)
        await get(client, "/s/0/episodes/9?format=json", 404)
    assert [t["call"] for t in body["turns"]] == [0, 0] and body["turns"][0]["rewritten"] == "ls"
    assert body["turns"][1]["spans"][1] == ["action", 2.5, 0.125]
    assert [c["started_s"] for c in body["llm_calls"]] == [0.0, 2.0]
    assert body["transcript"]["calls"][1]["sent"] == [0, 2, 3] and body["episode"]["task_id"] == "starter-bash/0"
    assert sample.id == "starter-bash/0" and sample.epoch == 1 and sample.target == "ls"
    assert [m.role for m in sample.messages][:2] == ["user", "assistant"]
    assert "format must be one of json, inspect" in refused


async def test_a_store_without_timing_shows_no_timeline(tmp_path: Path):
    out = tmp_path / "untimed"
    async with writer(out) as (store, run):
        await store.add_episode(run, "written", timed_record(timed=False))
    async with viewer(out) as (_, client):
        page = await get(client, "/s/0/episodes/1")
    assert 'id="timeline"' not in page and 'id="turn-2"' in page
