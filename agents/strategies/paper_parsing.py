"""How the paper's scripts took the action out of a model's answer, quirks included.

    bash, sql = kind_spec("bash"), kind_spec("sql")   # a strategy passes its environment's: env.spec
    paper_action("```bash\\nls -R\\n```", bash)        # ("ls -r", True): the Bash rule lower-cases
    paper_action("Let me see: SELECT 1;", sql)         # ("SELECT 1", True)
    react_action("execute[ls /testbed]", bash)         # ("ls /testbed", True)

Each function returns (action, is_code), by the rule the kind's spec names (`paper_parser`,
`react_code`). Without code the paper's harness ran nothing that turn and answered with its retry
message; `is_code` says which. These are the rules of the original harness's
`experiments/utils/utils.py` (its parsers for Single and Try Again, Plan & Solve, and ReAct),
written again here from what they do; `tests/unit/test_paper_parsing.py` holds the behaviour:

- **Bash** (`bash_action`): newlines become spaces; without a fence, a leading `bash: ` is dropped,
  or everything after `command:` is the action; otherwise the first fenced block's text,
  *lower-cased* and with its whitespace collapsed. Without a fence, the whole answer is the action
  (so a Bash answer always counts as code). A `Command:` that is not lower-case raised in the
  original (`str.index`), which ended the episode: `PaperParseError`.
- **SQL** (`sql_action`): `\\_` becomes `_`; without a fence, an answer starting with `SQL: ` gave its
  sixth character (a slip of the original's: `action[len("SQL: ")]`), else the text from the first
  of SHOW, SELECT, DESCRIBE, DESC it holds, up to a `;`. A fenced block must start with one of
  those words, or it is no code.
- **Python** (`python_action`): a `def` answer gets each run of five or more spaces turned into a
  newline and one space fewer (models flattened their functions).
- **CTF** (`ctf_action`): a leading `Action:` is dropped.
- **ReAct** (`react_action`): `submit` alone is the submission; otherwise the text inside the
  first `execute[...]` (greedy, to the last `]`), for SQL up to a `;`; else no code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from environments.kind import KindSpec, Parsed
from foundation.errors import ConfigError

SQL_KEYWORDS = ("SHOW", "SELECT", "DESCRIBE", "DESC")
_BASH_FENCES = (re.compile(r"```(?:bash|BASH|sh)?([\S\s]+?)```"), re.compile(r"```([\S\s]+?)```"))
_SQL_FENCES = (re.compile(r"```(?:sql|SQL)?([\S\s]+?)```"), re.compile(r"```([\S\s]+?)```"))
_EXECUTE = re.compile(r"execute\[(.*)\]", re.DOTALL)
_LONG_SPACES = re.compile(r" {5,}")


class PaperParseError(ValueError):
    """The original's parser raised on this answer; its harness ended the episode there."""


def _first_fenced(text: str, fences: tuple[re.Pattern[str], ...]) -> str | None:
    """The first match of the first pattern that has one (the original concatenated all matches
    of both patterns and took the first: the same thing)."""
    for fence in fences:
        found = fence.findall(text)
        if found:
            return " ".join(found[0].split())
    return None


def _up_to_semicolon(text: str) -> str:
    return text[: text.index(";")] if ";" in text else text


def bash_action(answer: str) -> Parsed:
    action = answer.replace("\n", " ")
    if "```" not in action:
        if action.lower().startswith("bash: "):
            return action[len("bash: "):], True
        if "command:" in action.lower():
            if "command:" not in action:
                raise PaperParseError("`Command:` in another case: the original's str.index raised")
            return action[action.index("command:") + len("command:"):], True
    fenced = _first_fenced(action.lower(), _BASH_FENCES)
    return (action, True) if fenced is None else (fenced, True)


def sql_action(answer: str) -> Parsed:
    action = answer.replace("\\_", "_")
    if "```" not in action:
        if action.startswith("SQL: "):
            return _up_to_semicolon(action[len("SQL: ")]), True
        for keyword in SQL_KEYWORDS:
            if keyword in action:
                return _up_to_semicolon(action[action.index(keyword):]), True
    fenced = _first_fenced(action, _SQL_FENCES)
    if fenced is None:
        return action, False
    fenced = _up_to_semicolon(fenced)
    words = fenced.split()
    return fenced, bool(words) and words[0].upper() in SQL_KEYWORDS


def python_action(answer: str) -> Parsed:
    if answer.startswith("def"):
        return _LONG_SPACES.sub(lambda m: "\n" + " " * (len(m.group(0)) - 1), answer), True
    return answer, True


def ctf_action(answer: str) -> Parsed:
    action = answer.strip()
    if action.startswith("Action:"):
        action = action[len("Action:"):].strip()
    return action, True


_ANY_FENCE = re.compile(r"```[^\n`]*\n?([\s\S]*?)```")


def code_or_whole(answer: str) -> Parsed:
    """Kinds the paper never ran (Harbor, your own): the first fenced block as it is (lines and
    case kept), else the whole answer."""
    found = _ANY_FENCE.search(answer)
    return (found.group(1).strip("\n"), True) if found else (answer.strip(), True)


def _whole(answer: str) -> Parsed:
    return answer, True


def up_to_semicolon(code: str) -> str:
    """SQL's ReAct rule: the code inside execute[...] up to a `;`."""
    return _up_to_semicolon(code)


def _as_is(code: str) -> str:
    return code


# The rules a kind names (KindSpec.paper_parser, KindSpec.react_code); register_paper_rule adds one.
PAPER_RULES: dict[str, Callable[[str], Parsed]] = {
    "bash": bash_action, "sql": sql_action, "python": python_action, "ctf": ctf_action,
    "code_or_whole": code_or_whole, "whole": _whole}
REACT_CODE: dict[str, Callable[[str], str]] = {"as_is": _as_is, "up_to_semicolon": up_to_semicolon}


def register_paper_rule(name: str, rule: Callable[[str], Parsed]) -> None:
    """A rule of one's own for a kind to name as its `paper_parser`."""
    PAPER_RULES[name] = rule


def _rule(rules: dict[str, Callable[..., Any]], name: str, spec: KindSpec, field: str) -> Callable[..., Any]:
    try:
        return rules[name]
    except KeyError:
        raise ConfigError(f"kind {spec.name} names {field} {name!r}, which is not one of {', '.join(sorted(rules))}") from None


def paper_action(answer: str, spec: KindSpec) -> Parsed:
    """The action of `answer` by the rule of the paper's Single / Try Again / Plan & Solve runs
    (the kind's `paper_parser`)."""
    rule: Callable[[str], Parsed] = _rule(PAPER_RULES, spec.paper_parser, spec, "paper_parser")
    return rule(answer)


def react_action(action: str, spec: KindSpec) -> Parsed:
    """The action of a ReAct `Action N:` line by the rule of the paper's ReAct runs."""
    if action == "submit":
        return action, True
    found = _EXECUTE.findall(action)
    if not found:
        return action, False
    code: Callable[[str], str] = _rule(REACT_CODE, spec.react_code, spec, "react_code")
    return code(found[0]), True
