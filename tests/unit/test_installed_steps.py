"""An installed agent's turns, read from its model calls (agents/strategies/installed.py, `steps`):
each command it ran, with what the command printed as the agent sent it back, without the notes
the agent adds for its model (Claude Code 2.x puts a `<system-reminder>` with the tokens left in
every tool result: left in, the Bash reward compared that with the gold output and found nothing)."""

from __future__ import annotations

from agents.base import ToolCall
from agents.own import Answer
from agents.strategies.installed import steps

REMINDER = "\n\n<system-reminder>\n<total_tokens>999 tokens left</total_tokens>\n</system-reminder>\n\n"


def test_a_tool_result_is_what_the_command_printed():
    call = Answer("", (ToolCall("t1", "Bash", '{"command": "grep -c ERROR app.log"}'),))
    log = [([{"role": "user", "content": "Count."}], call),
           ([{"role": "tool", "tool_call_id": "t1", "content": "2" + REMINDER}], Answer("Done."))]
    [ran, done] = steps(log)
    assert (ran.action, ran.observation, ran.executed) == ("grep -c ERROR app.log", "2\n", True)
    assert done.action is None and done.output == "Done."
    as_blocks = [([{"role": "user", "content": "Count."}], call),
                 ([{"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "2\n"},
                                                                       {"type": "text", "text": REMINDER}]}], Answer(""))]
    assert steps(as_blocks)[0].observation == "2\n"


def test_codex_s_exec_result_is_read_without_its_header():
    call = Answer("", (ToolCall("c1", "exec_command", '{"cmd": "grep -c ERROR app.log"}'),))
    wrapped = ("Chunk ID: 086642\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\n"
               "Output:\n2\n")
    log = [([{"role": "user", "content": "Count."}], call),
           ([{"role": "tool", "tool_call_id": "c1", "content": wrapped}], Answer("Done."))]
    assert steps(log)[0].observation == "2\n"
    plain = [log[0], ([{"role": "tool", "tool_call_id": "c1", "content": "Output:\n2\n"}], Answer(""))]
    assert steps(plain)[0].observation == "Output:\n2\n"  # a command's own output is never cut


def test_an_agent_s_words_for_no_output_are_no_output():
    call = Answer("", (ToolCall("t1", "Bash", '{"command": "mkdir -p /b"}'),))
    log = [([{"role": "user", "content": "Go."}], call),
           ([{"role": "tool", "tool_call_id": "t1", "content": "(Bash completed with no output)" + REMINDER}], Answer(""))]
    assert steps(log)[0].observation == ""
