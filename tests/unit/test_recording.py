"""Models record their own calls into the episode's context (agents/recording.py): no wrapper from
the application around them. A call an agent makes through the gateway arrives in the gateway's
task, outside the episode: the model handle makes it in the episode's context all the same."""

from __future__ import annotations

import asyncio
import contextvars

from agents.models import OracleModel
from agents.recording import EpisodeCalls, Transcript
from agents.strategies.external import ModelHandle
from foundation.timeline import Timeline
from tasks import Task
from tests.scripted import ScriptedModel

TASK = Task(kind="bash", dataset="local-notes", index=0, query="How many lines hold an a?",
            gold="grep -c a notes/a.txt", image="local/notes")
ASKED = [{"role": "user", "content": "How many lines hold an a?"}]


async def test_a_model_records_its_call_into_the_episode_s_context() -> None:
    calls, timeline = EpisodeCalls(transcript=Transcript()), Timeline()
    with timeline.current(), calls.current():
        text = await OracleModel().complete(ASKED, task=TASK, turn=0)
    assert calls.transcript is not None and len(calls.transcript.calls) == 1
    assert calls.transcript.messages == [*ASKED, {"role": "assistant", "content": text}]
    assert calls.calls == []  # an offline model costs nothing: no LLM call
    assert timeline.turn(text).call == 0  # on the timeline as the episode's first call


async def test_outside_an_episode_a_call_is_kept_nowhere() -> None:
    calls = EpisodeCalls(transcript=Transcript())
    await OracleModel().complete(ASKED, task=TASK, turn=0)
    assert calls.transcript is not None and calls.transcript.calls == []


async def test_a_call_through_the_gateway_is_recorded_in_the_episode_it_belongs_to() -> None:
    calls = EpisodeCalls(transcript=Transcript())
    with calls.current():  # the episode's task makes the handle
        handle = ModelHandle(ScriptedModel(["first", "second"]), TASK)
    # the gateway's request handler: a task of the server's, none of the episode's context
    gateway = contextvars.Context()
    answer = await asyncio.get_running_loop().create_task(handle.complete(ASKED), context=gateway)
    assert answer.text == "first"
    assert calls.transcript is not None and len(calls.transcript.calls) == 1
    assert calls.transcript.messages[-1] == {"role": "assistant", "content": "first"}
