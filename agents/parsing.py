"""Taking the action out of a model's answer.

    extract_action("Try this:\n```sql\nSELECT 1\n```", env.spec)    # "SELECT 1" (a SQL environment's)
    extract_react_action("Thought: ...\nAction: execute[ls]", env.spec)   # "ls"

The action is the first fenced block tagged with the environment's language (or untagged);
failing that, `submit` / `submit FLAG` / `skip` alone on a line. No code gives None: the strategy
then answers with the retry message and executes nothing. The kind is the environment's spec
(`env.spec`), as a strategy has it.
"""

from __future__ import annotations

import re

from environments.kind import KindSpec

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_INLINE_FENCE = re.compile(r"```([^`\n]+)```")
_CONTROL = re.compile(r"^[ \t]*(submit(?:[ \t]+\S.*?)?|skip)[ \t]*$", re.MULTILINE)
_REACT_ACTION = re.compile(r"^[ \t]*Action(?:[ \t]*\d+)?[ \t]*:[ \t]*", re.MULTILINE)
_REACT_OBSERVATION = re.compile(r"^[ \t]*Observation(?:[ \t]*\d+)?[ \t]*:", re.MULTILINE)
_EXECUTE = re.compile(r"^execute\s*\[(.*)\]", re.DOTALL)


def extract_action(output: str, kind: KindSpec) -> str | None:
    """The action of `output` for an environment of `kind`, or None when it holds no code."""
    tags = kind.fence_tags
    for match in _FENCE.finditer(output):
        tag, body = match.group(1).lower(), match.group(2).strip()
        if body and (not tag or tag in tags):
            return body
    for match in _INLINE_FENCE.finditer(output):  # ```ls -la``` on one line
        if body := match.group(1).strip():
            return body
    if control := _CONTROL.search(output):
        return control.group(1).strip()
    return None


def extract_react_action(output: str, kind: KindSpec) -> str | None:
    """The action of a ReAct answer: `Action: execute[CODE]`, `Action: submit [FLAG]`, or a fenced
    block after `Action:`; without an `Action:` line, whatever `extract_action` finds."""
    if observation := _REACT_OBSERVATION.search(output):  # the model imagined the observation: drop it
        output = output[: observation.start()]
    match = _REACT_ACTION.search(output)
    if match is None:
        return extract_action(output, kind)
    rest = output[match.end():].strip()
    if execute := _EXECUTE.match(rest):
        return execute.group(1).strip() or None
    return extract_action(rest, kind) or _first_line_control(rest)


def react_thought(output: str) -> str:
    """The text before the first `Action:` line (the model's reasoning), without a `Thought:` label."""
    match = _REACT_ACTION.search(output)
    thought = output[: match.start()] if match else output
    return re.sub(r"^\s*Thought(?:\s*\d+)?\s*:\s*", "", thought).strip()


def _first_line_control(rest: str) -> str | None:
    first = rest.splitlines()[0] if rest else ""
    control = _CONTROL.match(first)
    return control.group(1).strip() if control else None


def is_control(action: str) -> bool:
    """Whether `action` ends or scores the episode rather than running code (`submit`, `skip`)."""
    word = action.strip().split(maxsplit=1)
    return bool(word) and word[0] in ("submit", "skip")
