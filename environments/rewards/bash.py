"""The Bash reward, as the original computed it, and a strict variant that fixes its quirks.

reward = 0.01
       + round(0.33 * (1 - erf(missing + extra)), 2)      file system: `git status --short` vs gold's
       + round(0.33 * share of common changes whose hashes match, 2)   (0.33 when none in common)
       + round(0.33 * tfidf_cosine(last observation, gold output), 2)

Quirks of the original that change scores, reproduced in "original" mode:
- `git status --short` is split on whitespace and read in pairs, so paths with spaces break apart;
- only added, untracked or copied entries ("A", "??", "C") get their contents compared, never
  modified ones ("M");
- contents are hashed with `md5sum PATH` when the path holds a ".", else with `md5deep -r PATH`;
  md5deep was not installed, so both sides printed the same error and every path without a "."
  (directories, Makefiles) counted as matching.
"strict" mode parses `git status --porcelain -z`, compares every common change (also "M"), and
hashes files and directories for real (a sorted md5 listing for a directory).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

CONTENT_CODES = ("A", "??", "C")
TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


def parse_status(status: str) -> list[tuple[str, str]]:
    """The original's parser: whitespace-split `git status --short`, read as (code, path) pairs.
    Returns (path, code) pairs; an odd last token (the original crashed there) is dropped."""
    tokens = status.split()
    return [(tokens[i + 1], tokens[i]) for i in range(0, len(tokens) - 1, 2)]


def parse_porcelain(status: str) -> list[tuple[str, str]]:
    """`git status --porcelain -z`: NUL-separated `XY PATH` records (renames carry a second path)."""
    changes, records = [], status.split("\0")
    i = 0
    while i < len(records):
        record = records[i]
        i += 1
        if len(record) < 4:
            continue
        code, path = record[:2].strip(), record[3:]
        if code.startswith(("R", "C")):
            i += 1  # the rename's source path follows
        changes.append((path, code))
    return changes


def hash_command(path: str, strict: bool) -> list[str]:
    """The argv that hashes a changed path (run without a shell, from the image's workdir)."""
    if strict:
        return ["sh", "-c", 'if [ -d "$1" ]; then md5deep -r -l "$1" | sort; else md5sum "$1"; fi', "hash", path]
    return ["md5sum", path] if "." in path else ["md5deep", "-r", path]


def hashes_match(path: str, agent_hash: str, gold_hash: str, strict: bool) -> bool:
    if not strict and "." not in path:
        return True  # md5deep was missing in the original's images: both sides printed the same error
    return agent_hash == gold_hash


def content_paths(agent: list[tuple[str, str]], gold: list[tuple[str, str]], strict: bool) -> list[tuple[str, str]]:
    """The changes both made whose contents get compared."""
    common = set(agent) & set(gold)
    return sorted(change for change in common if strict or change[1] in CONTENT_CODES)


def tfidf_similarity(a: str, b: str) -> float:
    """Cosine similarity of scikit-learn's default TfidfVectorizer fitted on [a, b]; like the
    original's fallback, exact equality decides when neither text has a token."""
    tf_a, tf_b = Counter(TOKEN.findall(a.lower())), Counter(TOKEN.findall(b.lower()))
    vocabulary = set(tf_a) | set(tf_b)
    if not vocabulary:
        return 1.0 if a == b else 0.0
    df = Counter(term for tf in (tf_a, tf_b) for term in tf)

    def idf(term: str) -> float:
        return math.log(3 / (1 + df[term])) + 1  # smooth_idf over n=2 documents

    def unit(tf: Counter[str]) -> dict[str, float]:
        weights = {t: tf[t] * idf(t) for t in tf}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        return {t: w / norm for t, w in weights.items()} if norm else {}

    u, v = unit(tf_a), unit(tf_b)
    return sum(w * v.get(t, 0.0) for t, w in u.items())


@dataclass(frozen=True, slots=True)
class BashScore:
    reward: float
    file_diff: float
    file_changes: float
    answer_similarity: float
    missing: list[tuple[str, str]]
    extra: list[tuple[str, str]]
    compared: int
    matched: int


def bash_reward(agent_changes: list[tuple[str, str]], gold_changes: list[tuple[str, str]],
                hashes: Mapping[str, tuple[str, str]], agent_output: str, gold_output: str,
                strict: bool = False) -> BashScore:
    """hashes: path -> (agent's hash output, gold's hash output) for every path of content_paths()."""
    missing = sorted(set(gold_changes) - set(agent_changes))
    extra = sorted(set(agent_changes) - set(gold_changes))
    p1 = round(0.33 * (1 - math.erf(len(missing) + len(extra))), 2)
    compared = content_paths(agent_changes, gold_changes, strict)
    matched = sum(hashes_match(path, *hashes[path], strict=strict) for path, _ in compared)
    p2 = round(0.33 * (matched / len(compared)), 2) if compared else 0.33
    p3 = round(0.33 * tfidf_similarity(agent_output, gold_output), 2)
    return BashScore(0.01 + p1 + p2 + p3, p1, p2, p3, missing, extra, len(compared), matched)


PARTS = ("file_changes", "file_contents", "output_similarity")  # the terms, as breakdown() names them
FILE_CHANGE_VALUES = tuple(sorted({round(0.33 * (1 - math.erf(n)), 2) for n in range(4)}))  # 0.0, 0.05, 0.33
# Contents: 0.33 × the share of common changes whose hashes match, for up to a dozen common changes
# (more are rare: a split needing them is taken for an output that differs instead).
CONTENT_VALUES = tuple(sorted({round(0.33 * matched / compared, 2) for compared in range(1, 13)
                               for matched in range(compared + 1)}))


def recorded_split(reward: float, ours: Mapping[str, object]) -> dict[str, float] | None:
    """The split of a recorded reward into the three terms that is nearest ours (`ours`: the
    breakdown of our reward for the same turn): the recording keeps only the sum, and a term takes
    few values (file changes 0.33, 0.05 or 0; contents a share of up to a dozen changes; output 0 to
    0.33 by hundredths). Nearest: the fewest terms that differ from ours; then the output's before
    the others' (the term that varies most between two runs); then the smallest difference. None
    when no split of the three sums to it (a reward from another rule), or when ours has no terms."""
    if not all(isinstance(ours.get(name), int | float) for name in PARTS):
        return None
    mine = [float(ours[name]) for name in PARTS]  # type: ignore[arg-type]
    rest = round(reward - 0.01, 2)
    best: tuple[tuple[int, int, float], dict[str, float]] | None = None
    for changes in FILE_CHANGE_VALUES:
        for contents in CONTENT_VALUES:
            output = round(rest - changes - contents, 2)
            if not 0 <= output <= 0.33:
                continue
            split = (changes, contents, output)
            differ = [abs(a - b) > 0.005 for a, b in zip(split, mine)]
            key = (sum(differ), sum(differ[:2]), sum(abs(a - b) for a, b in zip(split, mine)))
            if best is None or key < best[0]:
                best = (key, dict(zip(PARTS, split)))
    return None if best is None else best[1]
