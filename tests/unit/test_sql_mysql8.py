"""MySQL 8's behaviour on MariaDB (environments/mysql8.py): the rewriting, and what the SQL
environment answers with it, on the starter database in a real MariaDB container."""

from __future__ import annotations

import pytest

from environments.mysql8 import as_mysql8

REWRITES = {
    "SELECT a, count(*) FROM t GROUP BY a": "SELECT a, count(*) FROM t GROUP BY a ORDER BY NULL",
    "select a from t group by a having count(*) > 1 limit 3;": "select a from t group by a having count(*) > 1 "
                                                               "ORDER BY NULL limit 3;",
    "SELECT ANY_VALUE(name), count(*) FROM t GROUP BY c;": "SELECT (name), count(*) FROM t GROUP BY c ORDER BY NULL;",
    "SELECT min(a), b FROM t": "SET STATEMENT sql_mode='ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,"
                               "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION' FOR SELECT min(a), b FROM t",
}
UNCHANGED = [
    "SELECT a, count(*) FROM t GROUP BY a ORDER BY 2 DESC LIMIT 1",  # ordered already
    "SELECT x FROM (SELECT a FROM t GROUP BY a) s",  # only the outermost SELECT
    "SELECT a FROM t GROUP BY a UNION SELECT b FROM u",  # a union's order is its own
    "SELECT a, count(*) FROM t GROUP BY a WITH ROLLUP",  # refuses ORDER BY
    "SELECT 'GROUP BY', `ANY_VALUE` FROM t -- GROUP BY a",  # strings, names and comments
    "SELECT name FROM t WHERE x = (SELECT max(y) FROM u)",  # no aggregate of its own
    "SHOW TABLES",
]


@pytest.mark.parametrize("query", REWRITES)
def test_the_rewriting(query: str) -> None:
    assert as_mysql8(query) == REWRITES[query]


@pytest.mark.parametrize("query", UNCHANGED)
def test_what_is_left_as_written(query: str) -> None:
    assert as_mysql8(query) == query
