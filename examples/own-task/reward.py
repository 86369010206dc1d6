"""The jq tasks' reward: the JSON values the answer printed against those the task's gold command
prints in the same container. 1 when they are the same; half a point at most for some of them."""

import json


def values(text):
    """The JSON values in a command's output, in order; a word that isn't JSON counts as text."""
    decoder, found, text, at = json.JSONDecoder(), [], text.strip(), 0
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            end = at + len(text[at:].split(None, 1)[0])
            value = text[at:end]
        found.append(value)
        at = len(text) - len(text[end:].lstrip())
    return found


async def reward(sandbox, task, answer):
    expected = values((await sandbox.run(task["gold"])).output)
    got = values(answer)
    matched = sum(1 for value in expected if value in got)
    score = 1.0 if got == expected else 0.5 * matched / max(len(expected), 1)
    return score, {"matched": matched, "expected": len(expected)}
