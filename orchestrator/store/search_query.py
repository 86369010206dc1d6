"""What is typed in the viewer's search box, read: terms (a word, a "quoted phrase", a word ending
in `*`: a prefix) and, between them, AND and OR in capitals.

Terms side by side must all occur, as with AND; OR joins two such groups, AND binding first as in
SQL (`a b OR c`: a and b, or c). An AND or OR that does not stand between two terms (first, last,
right after another) is a word, as lower-case `and` and `or` always are; so is any capital word
inside quotes.

Read three ways: as an FTS5 query (the full-text index, search_index.py), as the words to mark in
the texts shown, and as the groups of terms looked for in the tasks while the index is built
(episode_query.py). Nothing typed is FTS5 syntax: each term becomes a quoted string and only this
module writes operators and parentheses, so no input makes a bad query. Parentheses, NEAR, NOT,
`-`, `^`, `+` and colons are text, of which the index's tokenizer keeps letters and digits only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from foundation.errors import ConfigError

CHUNK = re.compile(r'"[^"]*"|\S+')  # a quoted phrase, or what lies between spaces
OPERATORS = ("AND", "OR")


@dataclass(frozen=True)
class Term:
    """A word or phrase to look for, without its quotes or star; `prefix`: it may go on."""

    text: str
    prefix: bool = False

    def fts(self) -> str:
        """As an FTS5 string: quoted, its quotes doubled (so nothing inside is syntax)."""
        return '"' + self.text.replace('"', '""') + '"' + ("*" if self.prefix else "")


def parse(text: str) -> list[list[Term]]:
    """The groups of a search: an episode matches when it has every term of any one group.
    ConfigError when there is nothing to look for."""
    groups = _groups(text)
    if not groups:
        raise ConfigError("the search has no word in it")
    return groups


def _groups(text: str) -> list[list[Term]]:
    # FTS5 reads its query up to a NUL: one inside a quoted term would leave the quote open.
    items = [item for chunk in CHUNK.findall(text.replace("\0", " ")) if (item := _item(chunk)) is not None]
    groups: list[list[Term]] = [[]]
    joins = False  # whether an operator may follow: the item before was a term
    for i, item in enumerate(items):
        if isinstance(item, str) and joins and i + 1 < len(items):
            if item == "OR":
                groups.append([])
            joins = False
        else:
            groups[-1].append(Term(item) if isinstance(item, str) else item)
            joins = True
    return [group for group in groups if group]


def _item(chunk: str) -> Term | str | None:
    """A chunk as an operator (its name), a term, or None when it holds nothing to look for (`*`, `""`)."""
    if chunk in OPERATORS:
        return chunk
    if len(chunk) > 1 and chunk.startswith('"') and chunk.endswith('"'):
        text, prefix = chunk[1:-1], False
    else:  # a word, or a quote left open (its quote is no part of the word)
        text, prefix = chunk.strip('"').rstrip("*"), chunk.endswith("*")
    return Term(text, prefix) if text.strip() else None


def fts_query(text: str) -> str:
    """The search as an FTS5 query (ConfigError when there is nothing to look for)."""
    parts = [" ".join(term.fts() for term in group) for group in parse(text)]
    return parts[0] if len(parts) == 1 else " OR ".join(f"({part})" for part in parts)


def words(text: str) -> list[str]:
    """The words of a search, lower-cased, for marking them in the texts shown (not its operators)."""
    return [w for group in _groups(text) for term in group for w in re.split(r"\W+", term.text.lower()) if w]
