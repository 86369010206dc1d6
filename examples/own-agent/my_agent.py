"""An agent of your own, outside the project: it asks the model for one action at a time in a
fenced code block, runs it, and feeds back what it printed (and the reward, where the task's kind
scores every action) until the model answers `submit`. Run it like a built-in strategy:

    strategies = ["try_again", "my_agent.py:Terse"]          # sweep.toml, beside this file
"""

from __future__ import annotations

import re

from agents.own import AgentModel, Episode

FENCE = re.compile(r"```[\w+-]*\n(.*?)```", re.DOTALL)
SYSTEM = ("You act in a {setting}. Answer with exactly one {language} action in a fenced code block; "
          "you will see what it printed. When you are done, answer ```\nsubmit\n``` (followed by your "
          "answer when the task asks for one, as in `submit FLAG`).")


class Terse:
    """One action an answer; the dialogue kept whole; `submit` when the model says so."""

    async def run(self, episode: Episode, model: AgentModel) -> None:
        messages = [{"role": "system", "content": SYSTEM.format(setting=episode.kind, language=episode.language)},
                    {"role": "user", "content": episode.query}]
        while episode.turns_left and not episode.done:
            answer = await model.complete(messages)
            messages.append({"role": "assistant", "content": answer.text})
            action = action_of(answer.text)
            if action.split(maxsplit=1)[:1] == ["submit"]:
                await episode.submit(action.removeprefix("submit").strip())
                return
            step = await episode.step(action)
            feedback = step.observation[-2000:] or "(no output)"
            if step.reward is not None:
                feedback += f"\n\nReward: {step.reward:g}"
            messages.append({"role": "user", "content": feedback})


def action_of(text: str) -> str:
    """The code of the answer's first fenced block, else the whole answer."""
    found = FENCE.search(text)
    return (found.group(1) if found else text).strip()
