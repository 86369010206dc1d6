"""The paper's action parsers (agents/strategies/paper_parsing.py), rule by rule, quirks included."""

from __future__ import annotations

import pytest

from agents.strategies.paper_parsing import PaperParseError, paper_action, react_action
from environments.kind import kind_spec


@pytest.mark.parametrize(("answer", "expected"), [
    ("```bash\nls -R /testbed\n```", ("ls -r /testbed", True)),  # fenced Bash is lower-cased
    ("Run this:\n```\nfind . -name '*.TXT'\n```", ("find . -name '*.txt'", True)),
    ("```sh\necho  a\n\necho b\n```", ("echo a echo b", True)),  # whitespace collapsed, newlines gone
    ("bash: ls -la", ("ls -la", True)),
    ("The command: wc -l x", (" wc -l x", True)),
    ("just some words", ("just some words", True)),  # no fence: the whole answer is the action
    ("two\nlines", ("two lines", True)),
])
def test_bash(answer, expected):
    assert paper_action(answer, kind_spec("bash")) == expected


def test_bash_command_in_another_case_raised_in_the_original():
    with pytest.raises(PaperParseError):
        paper_action("Command: ls", kind_spec("bash"))


@pytest.mark.parametrize(("answer", "expected"), [
    ("```sql\nSELECT name\nFROM singer;\n```", ("SELECT name FROM singer", True)),
    ("```\nshow tables\n```", ("show tables", True)),
    ("```sql\nUPDATE t SET a = 1\n```", ("UPDATE t SET a = 1", False)),  # not a read: no code
    ("I would SELECT count(*) FROM t; then stop", ("SELECT count(*) FROM t", True)),
    ("SQL: SELECT 1", ("S", True)),  # the original took one character here
    ("no query at all", ("no query at all", False)),
    ("SELECT a\\_b FROM t", ("SELECT a_b FROM t", True)),
])
def test_sql(answer, expected):
    assert paper_action(answer, kind_spec("sql")) == expected


def test_python_and_ctf():
    assert paper_action("def f(x):     return x", kind_spec("python")) == ("def f(x):\n    return x", True)
    assert paper_action("print(1)", kind_spec("python")) == ("print(1)", True)
    assert paper_action("  Action: cat flag.txt ", kind_spec("ctf")) == ("cat flag.txt", True)


@pytest.mark.parametrize(("action", "kind", "expected"), [
    ("submit", "bash", ("submit", True)),
    ("execute[ls /testbed]", "bash", ("ls /testbed", True)),
    ("execute[echo [a]]", "bash", ("echo [a]", True)),  # greedy: to the last ]
    ("execute[SELECT 1; DROP TABLE t]", "sql", ("SELECT 1", True)),
    ("ls /testbed", "bash", ("ls /testbed", False)),
    ("submit now", "bash", ("submit now", False)),
])
def test_react(action, kind, expected):
    assert react_action(action, kind_spec(kind)) == expected
