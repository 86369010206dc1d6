"""One recorded turn replayed by the rule of the script that recorded it, and compared.

- `eval_n_turn.py` and `eval_plan_solve.py`: the actions are recorded parsed. A turn whose
  observation is the retry message ran nothing and scored 0; otherwise the action ran and was
  scored "if submitted now" (`harness_step`: step, then submit, for Bash and SQL; Python
  auto-submitted a `def`; CTF scored only `submit FLAG`). In Plan & Solve's refine round a turn
  without code left the reward as it was, so it recorded the turn before's. `blocked` (the policy
  raised) ran nothing and scored 0.
- `eval_react.py`: the recorded action is the raw `Action N:` text; the script's ReAct parser
  (`react_action`) takes the code out. No code: nothing ran, reward 0, an error observation. Code:
  `step(code)`, whose reward is 0 but on `submit`, which scores and ends the episode.
- `eval_ctf.py`: the CTF environment's own step: 0 for a command, the flag's reward for `submit
  FLAG`, without ending the episode on a wrong one. The environment it ran with gave -1 for a wrong
  flag (the script counts submissions as rewards of 1 or -1; the published one gives 0): a
  recorded -1 on a submit is a wrong flag, our 0. The older environment's `cmd ` prefix is dropped.
- the human study: each action as the n-turn harness ran it; only the last turn has a reward.

Rewards are compared within 0.01; observations only to give a mismatch its reason (ReAct clipped
them before its prompt, and every script recorded them with `str()`). A turn the script's own rule
could not have recorded (a ReAct action that its parser reads as code, recorded as no code, or the
other way round) raises `OutOfGrammar`: the episode is bad, and is replayed no further.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agents.strategies.turns import harness_step
from environments.base import Environment
from agents.strategies.paper_parsing import react_action
from orchestrator.fidelity.trajectories import BLOCKED, CTF, REACT, RecordedEpisode, shown

TOLERANCE = 0.01 + 1e-9
# The retry messages of the original's templates ("No SQL code was found ...", "Format your ...")
# and of ours.
RETRY = re.compile(r"^(Format your .* as follows|No (\w+ )?code|Your output did not contain)", re.IGNORECASE)
REACT_NO_CODE = "Error executing query: Your last `execute` action did not contain"


class OutOfGrammar(Exception):
    """A recorded turn that the recording script's own parsing could not have produced."""


@dataclass
class TurnResult:
    episode: str
    turn: int
    action: str
    recorded: float | None
    ours: float | None  # None: not scored (`reason` says why)
    agree: bool
    reason: str = ""
    flag: str = ""  # why a scored turn is left out of the agreement share: its recording can't be reproduced
    observation: str = ""  # ours
    parts: dict[str, Any] | None = None  # our reward's parts (the environment's breakdown), when it scored

    @property
    def counted(self) -> bool:
        """Whether the turn counts in the agreement share."""
        return self.ours is not None and not self.flag


async def replay_turn(env: Environment, episode: RecordedEpisode, index: int, prior: float = 0.0) -> TurnResult:
    """Turn `index` of `episode`, replayed and compared; `prior` is our reward of the turn before."""
    turn = episode.turns[index]
    ours, observation, parts = await run_turn(env, episode, index, prior)
    if turn.reward is None:
        return TurnResult(episode.key, index, turn.action, None, ours, False, flag="no recorded reward",
                          observation=observation, parts=parts)
    expected = turn.reward
    if episode.format == CTF and expected == -1 and turn.action.strip().startswith("submit"):
        expected = 0.0  # a wrong flag, on the older environment's scale
    agree = abs(expected - ours) <= TOLERANCE
    reason = "" if agree else _reason(turn.observation, observation)
    return TurnResult(episode.key, index, turn.action, turn.reward, ours, agree, reason, observation=observation,
                      parts=parts)


async def run_turn(env: Environment, episode: RecordedEpisode, index: int,
                   prior: float) -> tuple[float, str, dict[str, Any] | None]:
    """Our (reward, observation, the reward's parts) for the turn, by the rule of the script that
    recorded it; parts only for a turn that scored."""
    turn = episode.turns[index]
    if episode.format == REACT:
        reward, observation = await _react_turn(env, turn.action, turn.observation)
        return reward, observation, None
    if turn.action == BLOCKED and turn.observation is None:
        return 0.0, "", None  # eval_n_turn's policy raised: nothing ran
    if isinstance(turn.observation, str) and RETRY.match(turn.observation):
        refining = episode.plan_steps is not None and index >= episode.plan_steps
        return (prior if refining else 0.0), turn.observation, None  # the harness executed nothing on that turn
    reward, observation = await harness_turn(env, turn.action)
    return reward, observation, env.breakdown()


async def _react_turn(env: Environment, action: str, recorded: Any) -> tuple[float, str]:
    code, is_code = react_action(action, env.spec)
    said_no_code = isinstance(recorded, str) and recorded.startswith(REACT_NO_CODE)
    if is_code == said_no_code:
        parsed = "code" if is_code else "no code (neither execute[...] nor submit)"
        raise OutOfGrammar(f"ReAct's parser reads {shown(action, 60)} as {parsed}, but the recording "
                           f"{'answered no code' if said_no_code else 'ran it'}")
    if not is_code:
        return 0.0, recorded
    step = await env.step(code)
    return step.reward, step.observation


async def harness_turn(env: Environment, action: str) -> tuple[float, str]:
    """One turn of the original's multi-turn harness (shared with our strategies); the older CTF
    harness prefixed shell commands with `cmd `."""
    step = await harness_step(env, env.spec.recorded_action(action))
    return step.reward, step.observation


def _reason(recorded: Any, ours: str) -> str:
    if not isinstance(recorded, str):
        recorded = str(recorded)
    if recorded == ours:
        return "same observation, different reward"
    rec_lines, our_lines = recorded.splitlines(), ours.splitlines()
    for a, b in zip(rec_lines, our_lines):
        if a != b:
            return f"observation differs: recorded {a[:60]!r}, ours {b[:60]!r}"
    return f"observation differs in length: {len(rec_lines)} recorded lines, {len(our_lines)} ours"
