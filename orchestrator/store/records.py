"""What the store keeps of an episode: value objects that map one to one onto schema.sql rows."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from agents.recording import LLMCall, Transcript
from foundation.outcome import NOT_THE_MODELS, Status


class EpisodeKey(NamedTuple):
    """An episode's identity within a sweep; a resume skips the keys already stored."""

    model: str
    strategy: str
    task_set: str
    task_id: str
    epoch: int


class Keyed:
    """A record of one episode, identified by its `key`; the key's parts read as the record's own
    (`record.model`), and `flat()` is the record as one flat mapping (downloads, exports)."""

    __slots__ = ()
    key: EpisodeKey

    @property
    def model(self) -> str:
        return self.key.model

    @property
    def strategy(self) -> str:
        return self.key.strategy

    @property
    def task_set(self) -> str:
        return self.key.task_set

    @property
    def task_id(self) -> str:
        return self.key.task_id

    @property
    def epoch(self) -> int:
        return self.key.epoch

    def flat(self) -> dict[str, Any]:
        """Every field, the key's parts in the key's place."""
        out: dict[str, Any] = {}
        for item in fields(self):  # type: ignore[arg-type]  # a dataclass's, which every Keyed is
            value = getattr(self, item.name)
            out.update(value._asdict() if item.name == "key" else {item.name: value})
        return out

    @classmethod
    def flat_names(cls) -> list[str]:
        return [name for item in fields(cls) for name in  # type: ignore[arg-type]
                (EpisodeKey._fields if item.name == "key" else (item.name,))]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    output: str
    action: str | None
    observation: str
    reward: float
    executed: bool
    breakdown: dict[str, Any] | None = None  # the reward's parts, where the kind gives them
    # When it began (seconds since the episode began) and how long it took, from its model call to
    # its last scoring; the call whose answer it is (its place among the episode's calls); and its
    # spans, [[kind, start, duration], ...] with kind call | action | reward. None: not recorded
    # (a store written before they were, a turn made outside a sweep).
    started_s: float | None = None
    duration_s: float | None = None
    call: int | None = None
    spans: list[list[Any]] | None = None
    rewritten: str | None = None  # what the dialogue kept in place of the answer, where the strategy changed it


@dataclass(slots=True)
class EpisodeRecord:
    key: EpisodeKey
    env: str
    dataset: str
    task_index: int
    query: str
    gold: str
    image: str
    max_turns: int
    started_at: float
    finished_at: float = 0.0
    status: str = Status.MAX_TURNS  # a Status
    failure_class: str | None = None  # a FailureClass, None when it did not fail
    error: str | None = None
    attempts: int = 1
    image_digest: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    host: str | None = None  # where its containers ran (the last attempt's)
    transcript: Transcript | None = None  # every message its model calls sent; None: not kept (`transcripts = false`)

    @property
    def reward(self) -> float:
        return max((t.reward for t in self.turns), default=0.0)

    @property
    def success(self) -> bool:
        failed = self.failure_class in NOT_THE_MODELS
        return self.status != Status.BUDGET_EXHAUSTED and not failed and self.reward == 1.0

    @property
    def served_model(self) -> str | None:
        return next((c.served_model for c in reversed(self.calls) if c.served_model), None)

    @property
    def cost_usd(self) -> float | None:
        """What its calls cost; 0 without any (the oracle, a replay), None when none could be priced."""
        if not self.calls:
            return 0.0
        known = [c.cost_usd for c in self.calls if c.cost_usd is not None]
        return sum(known) if known else None
