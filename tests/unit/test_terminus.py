"""The terminus harness (Terminus-2's protocol): its answers read as Harbor's reference agent reads
them, without Docker; then, in containers, the oracle and the local model typing into a tmux session
solve the starter Bash tasks and a Harbor folder, each answer a turn with what the terminal printed."""

from __future__ import annotations

import pytest

from agents.models import answer_as
from agents.strategies.terminus import MAX_WAIT, Keys, command_output, read_answer
from tasks import load_tasks


@pytest.mark.parametrize(("text", "keys", "complete"), [
    ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}], "task_complete": false}',
     [Keys("ls\n", 0.1)], False),
    ('Sure!\n{"commands": [{"keystrokes": "C-c"}, {"keystrokes": "", "duration": 5}]}\nthanks',
     [Keys("C-c", 1.0), Keys("", 5.0)], False),
    ('{"commands": [], "task_complete": true}', [], True),
    ('{"commands": [], "task_complete": "true"}', [], True),
    ('{"commands": [{"keystrokes": "make\\n", "duration": 9999}]}', [Keys("make\n", MAX_WAIT)], False),
])
def test_an_answer_is_read_as_keystrokes_with_waits(text, keys, complete):
    assert read_answer(text) == (keys, complete)


@pytest.mark.parametrize(("text", "words"), [
    ("I will run ls", "no JSON object"),
    ('{"commands": [{"keystrokes": "ls\\n"}', "not valid"),
    ('{"plan": "nothing"}', '"commands" is missing'),
    ('{"commands": [{"duration": 1}]}', 'command 1 has no "keystrokes"'),
    ('{"commands": [{"keystrokes": "ls", "duration": "soon"}]}', '"duration" is not a number'),
])
def test_an_answer_that_cant_be_read_says_why(text, words):
    with pytest.raises(ValueError, match=words):
        read_answer(text)


def test_the_last_commands_output_is_read_off_the_screen():
    screen = "root@intercode:/# grep -c ERROR /starter/logs/app.log\n2\nroot@intercode:/# "
    assert command_output("grep -c ERROR /starter/logs/app.log\n", screen) == "2\n"
    assert command_output("", "no prompt here") == "no prompt here\n"


def test_the_oracle_answers_in_the_protocol():
    task = load_tasks("starter-bash")[0]
    keys, complete = read_answer(answer_as(task, task.gold_text, "terminus", 0))
    assert [k.keystrokes for k in keys] == [task.gold_text + "\n"] and not complete
    assert read_answer(answer_as(task, "submit", "terminus", 1)) == ([], True)
