"""Taking the action out of model outputs (no containers)."""

from __future__ import annotations

import pytest

from agents.parsing import (
    extract_action,
    extract_react_action,
    is_control,
    react_thought,
)
from agents.strategies.turns import TRUNCATED, Dialogue, clip, retry_message
from agents.strategies.rules import plan_steps
from environments.kind import kind_spec


@pytest.mark.parametrize(("output", "kind", "action"), [
    ("Let me look.\n```bash\nls -la /starter\n```\nThen more.", "bash", "ls -la /starter"),
    ("```sh\nwc -l f\n```", "ctf", "wc -l f"),
    ("```SQL\nSELECT 1\n```", "sql", "SELECT 1"),
    ("```sql\nSHOW TABLES\n```\n```sql\nSELECT 2\n```", "sql", "SHOW TABLES"),
    ("```py\ndef f(x):\n    return x\n```", "python", "def f(x):\n    return x"),
    ("```\nSELECT name FROM authors\n```", "sql", "SELECT name FROM authors"),
    ("```python\nprint(1)\n```\n```bash\nls\n```", "bash", "ls"),  # another language's block is skipped
    ("```bash\ncat a | head\n", "bash", "cat a | head"),  # an unclosed fence (a cut-off answer)
    ("Run ```ls /tmp``` now", "bash", "ls /tmp"),
    ("```bash\nsubmit\n```", "bash", "submit"),
    ("I am done.\nsubmit\n", "sql", "submit"),
    ("The flag is below.\nsubmit starter{x_y}\n", "ctf", "submit starter{x_y}"),
    ("skip", "bash", "skip"),
])
def test_extract_action(output: str, kind: str, action: str) -> None:
    assert extract_action(output, kind_spec(kind)) == action


@pytest.mark.parametrize(("output", "kind"), [
    ("I would list the files first.", "bash"),
    ("```python\nprint(1)\n```", "sql"),  # only another language's code
    ("```sql\n\n```", "sql"),
    ("You should submit the answer when done.", "bash"),  # `submit` not alone on a line
    ("", "python"),
])
def test_no_code_is_none(output: str, kind: str) -> None:
    assert extract_action(output, kind_spec(kind)) is None


@pytest.mark.parametrize(("output", "action"), [
    ("Thought: look around\nAction: execute[ls /starter]", "ls /starter"),
    ("Thought 2: x\nAction 2: execute[awk '{print $1}' f | sort]\nObservation 2: made up", "awk '{print $1}' f | sort"),
    ("Thought: done\nAction: submit", "submit"),
    ("Thought: found it\nAction: submit starter{flag}", "submit starter{flag}"),
    ("Thought: t\nAction:\n```bash\ncat x\n```", "cat x"),
    ("```bash\npwd\n```", "pwd"),  # no Action line: the fenced form
])
def test_extract_react_action(output: str, action: str) -> None:
    assert extract_react_action(output, kind_spec("bash")) == action


def test_react_without_action_is_none() -> None:
    assert extract_react_action("Thought: I wonder.\nAction: ask the user", kind_spec("bash")) is None
    assert react_thought("Thought 1: look first\nAction 1: execute[ls]") == "look first"


def test_controls() -> None:
    assert is_control("submit") and is_control("submit flag{1}") and is_control(" skip ")
    assert not is_control("submitter --x") and not is_control("ls")


def test_retry_message_shape() -> None:
    assert retry_message(kind_spec("sql")) == "Format your SQL command as follows:\n```SQL\nYour SQL code here\n```\n"
    assert retry_message(kind_spec("bash")).startswith("Format your BASH command as follows:")
    assert retry_message(kind_spec("python")).startswith("Format your PYTHON command as follows:")


def test_clip() -> None:
    assert clip("short") == "short"
    assert clip("x" * 801) == "x" * 800 + TRUNCATED
    assert clip("abcdef", 3) == "abc" + TRUNCATED


def test_dialogue_keeps_head_and_last_turns() -> None:
    dialogue = Dialogue([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], limit=2)
    for i in range(5):
        dialogue.add("assistant", f"a{i}")
        dialogue.add("user", f"o{i}")
    assert [m["content"] for m in dialogue.window()] == ["s", "q", "a3", "o3", "a4", "o4"]
    dialogue.limit = None
    assert len(dialogue.window()) == 12


def test_plan_steps() -> None:
    plan = "Here is my plan:\n1. Show the tables\n2. Describe the books\n   table\n3) Count per genre\nGood luck"
    assert plan_steps(plan) == ["Show the tables", "Describe the books table", "Count per genre Good luck"]
    assert plan_steps("no steps here") == []
