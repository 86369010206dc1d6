"""What the paper's protocols share: its action parsers, its observation clipping, and one turn of
its multi-turn harness (the original's `experiments/eval_n_turn.py`, also used by its Plan & Solve).

A turn: the model's answer is parsed by the paper's rule for the kind (environments/paper_parsing.py).
No code: nothing runs, reward 0, the retry message is the observation. Code: it runs and is scored
as the harness did (`common.harness_step`: Bash and SQL "if submitted now", Python's `def`
auto-submitted, CTF only at `submit FLAG`). An answer the original's parser raised on ended its
episode there (a "blocked" turn, reward 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.base import Turn
from agents.strategies.common import harness_step, retry_message
from environments.paper_parsing import PaperParseError, paper_action

if TYPE_CHECKING:
    from environments.base import Environment

BLOCKED = "blocked: the original's parser raised on this answer, which ended its episode"


def paper_clip(env: Environment, observation: str, chars: int, rows: int) -> str:
    """An observation as the paper's harness put it into a prompt: a result of more than `rows`
    rows (SQL) cut to its first `rows`, any other text to its first `chars` characters, silently."""
    result = env.observation_rows()
    if result is not None:
        return str(result[:rows]) if len(result) > rows else observation
    return observation[:chars]


async def paper_turn(env: Environment, output: str) -> tuple[Turn, str, bool]:
    """One turn of the paper's n-turn harness: (the turn, the answer as its parser left it, which
    the harness put back into the dialogue instead of the answer, whether the episode was blocked)."""
    try:
        action, is_code = paper_action(output, env.kind)
    except PaperParseError:
        return Turn(output, None, BLOCKED, 0.0, False), output, True
    if not is_code:
        return Turn(output, None, retry_message(env.kind), 0.0, False), action, False
    reward, observation, executed = await harness_step(env, action)
    return Turn(output, action, observation, reward, executed, env.breakdown()), action, False
