"""Transcripts: every message each model call sent, stored once per distinct message, read back whole.

The unit tests check the encoding (a growing, windowed dialogue stores no prefix twice; an edited
message is a new one; turns find the answers that produced them). The sweep test runs real
episodes against the scripted LLM server over real HTTP and checks each call's stored messages
and tools against what the server received, and each kind's reward breakdown; a sweep with
`transcripts = false` stores none, and an older store opens with "no transcript stored".
"""

from __future__ import annotations

import sqlite3
import zlib
from contextlib import closing

import aiohttp

from agents.strategies.turns import Dialogue
from orchestrator.store import Store
from orchestrator.store.store import SCHEMA
from orchestrator.store.transcript import Transcript, decode, kept, runs, turns_of_calls
from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.stores import dialogue_record, rows, write_episodes


def test_a_windowed_dialogue_stores_each_message_once_and_reads_back_every_call_whole():
    talk = Dialogue([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], limit=2)
    transcript, sent = Transcript(), []
    for k in range(6):
        window = talk.window()
        sent.append([dict(m) for m in window])
        transcript.record(window, {"role": "assistant", "content": f"A{k}"}, None, {"finish_reason": "stop"})
        talk.add("assistant", f"A{k}")
        talk.add("user", f"O{k}")
    assert len(transcript.messages) == 2 + 6 + 5  # head, each answer, each observation a call was sent
    assert [len(c["sent"]) for c in transcript.calls] == [1, 1, 1, 2, 2, 2]  # runs: whole, then head and window
    stored = decode(transcript.encode())
    assert [c.sent for c in stored.calls] == sent
    assert [c.answer["content"] for c in stored.calls] == [f"A{k}" for k in range(6)]
    # what each call added: the head first, then only the observation (its answer is the call before's)
    assert [[m["content"] for m in c.added] for c in stored.calls] == [["S", "Q"], *[[f"O{k}"] for k in range(5)]]


def test_an_edited_message_is_a_new_one_and_tools_are_kept_once():
    transcript = Transcript()
    head = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    answer = {"role": "assistant", "content": "```bash\nls\n```"}
    transcript.record(head, answer, tools)
    edited = {"role": "assistant", "content": "ls"}  # the paper's Try Again keeps its parser's reading
    transcript.record([*head, edited, {"role": "user", "content": "O"}], {"role": "assistant", "content": "x"}, tools)
    stored = decode(transcript.encode())
    assert [m["content"] for m in stored.calls[1].added] == ["ls", "O"]
    assert len(transcript.tools) == 1 and stored.calls[1].tools == tools
    assert zlib.decompress(transcript.encode()).count(b'"bash"') == 1


def test_turns_find_the_answers_that_made_them():
    transcript = Transcript()
    for text in ("plan", "A", "A", "B"):
        transcript.record([{"role": "user", "content": "Q"}], {"role": "assistant", "content": text})
    calls = decode(transcript.encode()).calls
    # the plan made no turn; a model that repeats itself makes a turn per call; the closing submit
    # the sweep made stays with the last answer
    assert turns_of_calls(calls, ["A", "A", "B", ""]) == [[], [0], [1], [2, 3]]
    assert runs([0, 1, 4, 5, 6]) == [[0, 2], [4, 7]] and kept([0, 1, 2, 3, 4, 5], [0, 1, 4, 5, 6, 7]) == 4


async def test_an_older_store_opens_with_no_transcript_stored_and_gains_the_table(tmp_path):
    out = tmp_path / "old"
    await write_episodes(out, "old", [dialogue_record(0, [0.0, 1.0], status="solved")])
    with closing(sqlite3.connect(out / "results.db")) as db:  # as a store made before transcripts were kept
        db.execute("DROP TABLE transcripts")
        db.commit()
    async with serving([Source.open(0, out)], "127.0.0.1", 0) as base, aiohttp.ClientSession(base) as client:
        async with client.get("/s/0/episodes/1") as response:
            page = await response.text()
    assert response.status == 200 and "no transcript stored" in page and page.count('<section class="turn"') == 2
    async with Store.open(out, sweep="old", identity="old-id"):
        pass  # the writer brings the schema up to date
    assert rows(out, "SELECT count(*) FROM transcripts") == [(0,)] and rows(out, "SELECT count(*) FROM episodes") == [(1,)]
    assert "transcripts" in SCHEMA.read_text()
