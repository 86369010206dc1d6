"""Two texts with what differs marked: words on the left that the right lacks, and the other way.

Word by word (whitespace kept) for texts of a few thousand words; line by line beyond that; and
for texts too long even for lines, only whether they differ (difflib's matcher is quadratic at worst).
"""

from __future__ import annotations

import difflib
import re

from orchestrator.view.layout import esc

WORDS_MAX, LINES_MAX = 4000, 2000
TOKEN = re.compile(r"\s+|[^\s]+")


def marked(left: str, right: str) -> tuple[str, str, bool]:
    """(left as HTML with its own parts marked <del>, right with its own marked <ins>, whether they differ)."""
    if left == right:
        return esc(left), esc(right), False
    a, b = TOKEN.findall(left), TOKEN.findall(right)
    if max(len(a), len(b)) > WORDS_MAX:
        a, b = left.splitlines(keepends=True), right.splitlines(keepends=True)
        if max(len(a), len(b)) > LINES_MAX:
            return esc(left), esc(right), True
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        part_a, part_b = esc("".join(a[i1:i2])), esc("".join(b[j1:j2]))
        if op == "equal":
            out_a.append(part_a)
            out_b.append(part_b)
            continue
        if part_a:
            out_a.append(f'<del class="diff">{part_a}</del>')
        if part_b:
            out_b.append(f'<ins class="diff">{part_b}</ins>')
    return "".join(out_a), "".join(out_b), True
