"""MySQL 8's behaviour on MariaDB, where MariaDB allows it: what the original's server did with a
query, applied to the query's text before MariaDB runs it.

- **Groups unsorted.** MariaDB sorts the groups of a `GROUP BY` by their key when the query has no
  `ORDER BY`; MySQL 8 (since 8.0) returns them as its plan met them. `ORDER BY NULL` switches
  MariaDB's sort off, and then it too returns the groups as met. Added to an outermost `SELECT`
  that has a `GROUP BY` and no `ORDER BY` (not to a `UNION` and its kin, nor `WITH ROLLUP`, which
  refuses an `ORDER BY`).
- **ANY_VALUE(expr).** MySQL 8 has it, MariaDB does not. It is not an aggregate: it returns its
  argument, of its argument's type, exempt from `ONLY_FULL_GROUP_BY`. The server runs without
  that mode, so a bare `expr` is the same: in a group, the value of the row the plan met first, as
  MySQL's; without a group, every row's. A stored function would have to fix one return type
  (text for numbers), and a stored aggregate would collapse a query without `GROUP BY` to one row.

- **Aggregates without GROUP BY.** MySQL 8 runs with `ONLY_FULL_GROUP_BY` and refuses a query
  that mixes an aggregate with a bare column and has no `GROUP BY` (`SELECT min(a), b FROM t`;
  the original compared a gold refused so with no rows). MariaDB's own check of that mode refuses
  the same; so such a query runs under it, with `SET STATEMENT ... FOR`, and the refusal stands.
  Queries with a `GROUP BY` run without it: MariaDB's check there misses columns that depend on
  a grouped primary key, which MySQL 8 accepts (20 of the first 200 Spider golds).
- **Ties in the order the rows were grouped.** Where a sort's keys tie (`GROUP BY x ORDER BY
  count(*) DESC LIMIT 1`), MariaDB's in-memory temporary tables break the tie by the rows' memory
  addresses: which of the tied groups comes first changed from one server start, and one session,
  to the next (Spider #569: `rs`, `math` or `ml`). On disk the tie falls by the rows' places in the
  file, alike in every session and every server, and in #569 as MySQL 8's recorded answer (`math`).
  A session answering as MySQL 8 keeps its temporary tables on disk (`SESSION`), tiny for these
  databases.

The text is only rewritten; strings, quoted names and comments are left alone. A query that MariaDB
refuses once rewritten is run as written, so its error is the one the agent's own text gets
(`SqlSession.run`).
"""

from __future__ import annotations

import re

# Opaque pieces (strings, quoted names, comments), words, and the punctuation that matters.
TOKEN = re.compile(r"""'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`(?:[^`]|``)*`|--[^\n]*|\#[^\n]*|/\*.*?\*/"""
                   r"""|[A-Za-z_][A-Za-z0-9_$]*|[();,]|\s+|.""", re.DOTALL)
VERSION = "mysql8-v2"  # in the gold cache's keys: bump when the rewriting or SESSION changes
# Session settings of a session answering as MySQL 8 (see the module: ties).
SESSION = "tmp_memory_table_size = 0"
SET_OPERATIONS = {"UNION", "INTERSECT", "EXCEPT", "MINUS"}
# Top-level clauses that follow ORDER BY: ORDER BY NULL goes before the first of them.
AFTER_ORDER = {"LIMIT", "PROCEDURE", "INTO", "FOR", "LOCK", "FETCH", "OFFSET"}


AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "GROUP_CONCAT", "STD", "STDDEV", "STDDEV_POP", "STDDEV_SAMP",
              "VARIANCE", "VAR_POP", "VAR_SAMP", "BIT_AND", "BIT_OR", "BIT_XOR", "JSON_ARRAYAGG", "JSON_OBJECTAGG"}
# The server's sql_mode (images/sql/intercode.cnf) with MySQL 8's check added.
FULL_GROUP_BY = "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
REFUSED = "Mixing of GROUP columns"  # MariaDB's words for the refusal MySQL 8 made too


def as_mysql8(query: str) -> str:
    """The query, rewritten so that MariaDB answers it as MySQL 8 did (see the module)."""
    return _checked_aggregates(_unsorted_groups(_without_any_value(query)))


def refused_as_mysql8(error: str) -> bool:
    """Whether MariaDB's error is one that MySQL 8 gave the query too (it stands)."""
    return error.startswith(REFUSED)


def _words(tokens: list[str]) -> list[tuple[int, str, int]]:
    """(index, upper-cased word, parenthesis depth) of every word token."""
    out, depth = [], 0
    for i, token in enumerate(tokens):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif token[:1].isalpha() or token[:1] == "_":
            out.append((i, token.upper(), depth))
    return out


def _unsorted_groups(query: str) -> str:
    tokens = TOKEN.findall(query)
    words = _words(tokens)
    top = [(i, w) for i, w, depth in words if depth == 0]
    names = [w for _, w in top]
    if not names or names[0] != "SELECT" or SET_OPERATIONS & set(names) or "ROLLUP" in names:
        return query
    if not _has_pair(names, "GROUP") or _has_pair(names, "ORDER"):
        return query
    group_at = next(i for i, (_, w) in enumerate(top) if w == "GROUP")
    after = [i for i, w in top[group_at:] if w in AFTER_ORDER]
    cut = after[0] if after else _end(tokens)
    head, tail = "".join(tokens[:cut]).rstrip(), "".join(tokens[cut:])
    return f"{head} ORDER BY NULL {tail.lstrip()}" if after else f"{head} ORDER BY NULL{tail}"


def _has_pair(names: list[str], first: str) -> bool:
    """Whether `first BY` is among the top-level words."""
    return any(a == first and b == "BY" for a, b in zip(names, names[1:]))


def _end(tokens: list[str]) -> int:
    """Where the statement's text ends: before trailing semicolons, spaces and comments."""
    end = len(tokens)
    while end and (tokens[end - 1] == ";" or tokens[end - 1].isspace() or tokens[end - 1][:2] in ("--", "/*")
                   or tokens[end - 1][:1] == "#"):
        end -= 1
    return end


def _without_any_value(query: str) -> str:
    """`ANY_VALUE(expr)` as `(expr)`: the call's name dropped, its parentheses kept."""
    tokens = TOKEN.findall(query)
    for i, token in enumerate(tokens):
        if token.upper() == "ANY_VALUE" and _next_is_paren(tokens, i):
            tokens[i] = ""
    return "".join(tokens)


def _next_is_paren(tokens: list[str], i: int) -> bool:
    rest = (t for t in tokens[i + 1:] if not t.isspace())
    return next(rest, "") == "("


def _checked_aggregates(query: str) -> str:
    """An outermost SELECT with an aggregate of its own and no GROUP BY, run under ONLY_FULL_GROUP_BY."""
    tokens = TOKEN.findall(query)
    words = _words(tokens)
    top = [w for _, w, depth in words if depth == 0]
    if not top or top[0] != "SELECT" or _has_pair(top, "GROUP") or SET_OPERATIONS & set(top):
        return query
    calls = {w for i, w, depth in words if depth == 0 and w in AGGREGATES and _next_is_paren(tokens, i)}
    if not calls:
        return query
    return f"SET STATEMENT sql_mode='{FULL_GROUP_BY}' FOR {query}"
