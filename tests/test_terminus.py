"""The terminus harness (Terminus-2's protocol): its answers read as Harbor's reference agent reads
them, without Docker; then, in containers, the oracle and the local model typing into a tmux session
solve the starter Bash tasks and a Harbor folder, each answer a turn with what the terminal printed."""

from __future__ import annotations

import json

import pytest

from agents.models import answer_as
from agents.strategies.terminus import MAX_WAIT, Keys, command_output, read_answer
from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from tasks import load_tasks
from tests.stores import rows

HELLO = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "hello-file"


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


@pytest.mark.docker
def test_terminus_types_into_a_terminal_and_solves_with_the_oracle_and_the_local_model(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "terminus"\noutput = "{tmp_path / "out"}"\nstrategies = ["terminus"]\nmax_turns = 5\n'
                     '[[models]]\nname = "oracle"\n'
                     '[[models]]\nname = "openai/sim"\nlocal = { latency = 0.01, solve_rate = 1.0, seed = 2 }\n'
                     f'[[tasks]]\ndataset = "starter-bash"\n[[tasks]]\nharbor = "{HELLO}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    found = rows(out, "SELECT model, task_id, status FROM episodes")
    assert len(found) == 12 and all(status == "solved" for *_, status in found), found
    turns = rows(out, "SELECT t.action, t.observation FROM turns t JOIN episodes e ON e.id = t.episode_id "
                      "WHERE e.task_id = 'starter-bash/0' AND e.model = 'oracle' ORDER BY t.idx")
    assert turns[0][0] == "grep -c ERROR /starter/logs/app.log\n" and turns[0][1].splitlines()[-2:][0].strip() == "2"
    assert [action for action, _ in turns[1:]] == [None, None, "submit"]  # complete, confirmed, then scored
    first = rows(out, "SELECT t.output FROM turns t JOIN episodes e ON e.id = t.episode_id "
                      "WHERE e.model = 'openai/sim' ORDER BY t.idx LIMIT 1")[0][0]
    assert json.loads(first)["commands"]
