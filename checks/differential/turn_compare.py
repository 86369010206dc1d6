"""Comparing the sides turn by turn: agreement, Bash's three terms, and classes of difference.

Pure: no engine, no processes. A side's answer to a turn is a dict with `reward` (and for Bash
`terms`), `observation`, and `info`; or `error` when that side raised (the original's harness would
have crashed there) or the episode could not start. Rewards agree within 1e-6: both sides do the
same arithmetic, so any real difference is at least 0.01.

A difference is put in the first class whose rule matches, tried in the order of CLASSES: the
original disagreeing with itself first, then what the action or gold does (file ages, the clock,
archives, background jobs, ...), then what differs (which term, the observation or not).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 1e-6
TERMS = {"fs": "file_diff", "content": "file_changes", "output": "answer_similarity"}


@dataclass(frozen=True)
class TurnRecord:
    suite: str
    source: str  # gold | recording | variant
    kind: str
    episode: str
    turn: int
    action: str
    gold: str
    ours: dict[str, Any]
    original: dict[str, Any]
    again: dict[str, Any] | None = None  # a second run of the original


def comparable(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    return b is not None and "reward" in a and "reward" in b


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= TOLERANCE


def agree(record: TurnRecord) -> bool:
    return same(record.ours.get("reward"), record.original.get("reward"))


def term_agrees(record: TurnRecord, term: str) -> bool:
    name = TERMS[term]
    return same((record.ours.get("terms") or {}).get(name), (record.original.get("terms") or {}).get(name))


def self_agrees(record: TurnRecord) -> bool | None:
    """Whether the original agreed with its second run; None when there is none to compare."""
    if not comparable(record.original, record.again):
        return None
    assert record.again is not None
    return same(record.original.get("reward"), record.again.get("reward"))


# (class, rule on the action and gold text); the first that matches names a difference's cause.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("file ages (-mmin, -atime, -mtime, -newer)", re.compile(r"-[acm](?:min|time)\b|-daystart|-newer|%[TAC]")),
    ("the clock and live system (date, df, load, users, processes, /proc)",
     re.compile(r"\b(?:date|df|uptime|who|w|free|ps|top|last)\b(?!\.)|/proc")),
    ("directory sizes (du, ls -s)", re.compile(r"\bdu\b|\bls\s+-\w*s")),
    ("archive timestamps (tar, gzip, zip, compress)", re.compile(r"\b(?:tar|gzip|gunzip|zip|compress|bzip2|xz)\b")),
    ("background processes", re.compile(r"&\s*$|&\s*[^&>]|\bnohup\b|\bsetsid\b|\bdisown\b")),
    ("network (dig, curl, ping, wget)", re.compile(r"\b(?:dig|curl|ping|wget|nslookup|host|ifconfig|ip|netstat)\b")),
    ("hostname and environment", re.compile(r"\b(?:hostname|env|printenv|uname)\b|\$HOSTNAME")),
    ("permission bits and owners", re.compile(r"\b(?:chmod|chown|stat|umask)\b|-perm\b|\bls\s+-\w*l")),
    ("ordering ties (ls -t, sort)", re.compile(r"\bls\s+-\w*t|\bsort\b")),
]


def classify(record: TurnRecord) -> str:
    """The class of a turn whose rewards differ (or where one side raised)."""
    ours, original = record.ours, record.original
    if "error" in original and "error" not in ours:
        return f"the original raised ({_error_kind(original['error'])})"
    if "error" in ours and "error" not in original:
        return f"ours raised ({_error_kind(ours['error'])})"
    if "error" in ours:
        return "both raised"
    if self_agrees(record) is False:
        return "the original disagrees with itself"
    text = f"{record.action}\n{record.gold}"
    for name, pattern in PATTERNS:
        if pattern.search(text):
            return name
    return _what_differs(record)


def _what_differs(record: TurnRecord) -> str:
    ours, original = record.ours, record.original
    if record.kind == "bash":
        terms = [term for term in TERMS if not term_agrees(record, term)]
        seen = "same" if ours.get("observation") == original.get("observation") else "different"
        return f"other: {'+'.join(terms) or 'sum'} term, {seen} observation"
    seen = "same" if ours.get("observation") == original.get("observation") else "different"
    return f"other: {seen} observation"


def _error_kind(error: str) -> str:
    return error.split(":", 1)[0][:60]


@dataclass
class Tally:
    """Agreement over a set of turns."""

    turns: int = 0
    agree: int = 0
    terms: Counter[str] = field(default_factory=Counter)  # term -> turns it agrees on
    self_turns: int = 0
    self_agree: int = 0
    uncompared: int = 0  # a side raised, or the episode could not start

    def share(self, n: int | None = None) -> float | None:
        return (self.agree if n is None else n) / self.turns if self.turns else None

    def term_share(self, term: str) -> float | None:
        return self.terms[term] / self.turns if self.turns else None

    def self_share(self) -> float | None:
        return self.self_agree / self.self_turns if self.self_turns else None


def tally(records: Iterable[TurnRecord]) -> Tally:
    out = Tally()
    for record in records:
        if not comparable(record.ours, record.original):
            out.uncompared += 1
            continue
        out.turns += 1
        out.agree += agree(record)
        if record.kind == "bash":
            for term in TERMS:
                out.terms[term] += term_agrees(record, term)
        mine = self_agrees(record)
        if mine is not None:
            out.self_turns += 1
            out.self_agree += mine
    return out


def differences(records: Iterable[TurnRecord]) -> dict[str, list[TurnRecord]]:
    """Turns whose rewards differ, or where exactly one side raised, by class (largest first)."""
    groups: dict[str, list[TurnRecord]] = defaultdict(list)
    for record in records:
        if comparable(record.ours, record.original) and agree(record):
            continue
        if "error" in record.ours and "error" in record.original and record.ours == record.original:
            continue  # an episode that could not start on either side: not a difference
        groups[classify(record)].append(record)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def self_differences(records: Iterable[TurnRecord]) -> list[TurnRecord]:
    return [r for r in records if self_agrees(r) is False]
