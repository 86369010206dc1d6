"""How an episode ended, in the one vocabulary every layer uses: its status and, for a failure, its
class (whose failure it was). Both are `StrEnum`s: a member is its own string, so the store, the
viewer's filters and old results files read and write them as the words they always were.

    outcome.status = Status.SOLVED
    record.status, record.failure_class = Status.INFRA_ERROR, FailureClass.INFRA
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """An episode's status, as stored."""

    SOLVED = "solved"  # its reward reached 1
    SUBMITTED = "submitted"  # it ended (submitted, or the agent stopped) below 1
    MAX_TURNS = "max_turns"  # its turns ran out
    MODEL_ERROR = "model_error"  # the model could not answer
    BUDGET_EXHAUSTED = "budget_exhausted"  # the sweep's budget cut it short
    AGENT_ERROR = "agent_error"  # an agent of yours, or an installed one, failed
    TIMEOUT = "timeout"  # over its time limit
    TASK_ERROR = "task_error"  # the task could not run (or an error of ours, logged)
    INFRA_ERROR = "infra_error"  # the engine or a container failed, past the re-runs
    VERIFIER_ERROR = "verifier_error"  # a task's verifier or reward failed
    VERIFIER_OFFLINE = "verifier_offline"  # a verifier that needs the internet, offline


# The strategy stopped before the episode was over: nothing more is played or submitted
STOPPED = frozenset({Status.MODEL_ERROR, Status.BUDGET_EXHAUSTED, Status.AGENT_ERROR})


class FailureClass(StrEnum):
    """Whose failure a failed episode was (the report counts each; only `infra` is re-run)."""

    MODEL = "model"
    TASK = "task"
    INFRA = "infra"
    VERIFIER = "verifier"
    AGENT = "agent"
    NETWORK = "network"


# Failures that are not the model's: such an episode's reward is no score of the model (Harbor leaves
# such trials out); a model's failure is the model's 0
NOT_THE_MODELS = frozenset(FailureClass) - {FailureClass.MODEL}
# Failures after which nobody knows the reward, never the model's 0: the task's verifier gave none, or
# needed the internet its container did not have; the episode is unscored
UNSCORED = frozenset({FailureClass.VERIFIER, FailureClass.NETWORK})
