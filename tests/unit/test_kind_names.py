"""What a kind needs is on its KindSpec (environments/kind.py): outside `environments/`, at most
four lines compare a kind with a kind's name, key a table on the kinds' names, or list them in a
`Literal`. The scan finds each form (the second test)."""

from __future__ import annotations

import ast

from foundation.settings import PROJECT_ROOT

KINDS = frozenset({"bash", "sql", "python", "ctf"})
OUTSIDE = ("orchestrator", "agents", "tasks", "foundation")
MOST = 4


def names(node: ast.AST) -> list[str]:
    """The kind names `node` holds: a string, or a tuple, list or set of them."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [item.value for item in items if isinstance(item, ast.Constant) and item.value in KINDS]


def is_kind(node: ast.AST) -> bool:
    """`kind`, `env` or an attribute of that name (`spec.kind`, `task.kind`)."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("kind", "env")


def knowing_lines(source: str) -> list[int]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_kind(side) for side in sides) and any(names(side) for side in sides):
                found.add(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = [name for key in node.keys if key is not None for name in names(key)]
            if len(keys) >= 2:
                found.add(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            if len(names(node.slice)) >= 2:
                found.add(node.lineno)
    return sorted(found)


def test_at_most_four_lines_outside_environments_know_a_kind_by_name():
    found = []
    for package in OUTSIDE:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            lines = path.read_text().splitlines()
            found += [f"{path.relative_to(PROJECT_ROOT)}:{n}: {lines[n - 1].strip()}"
                      for n in knowing_lines(path.read_text())]
    assert len(found) <= MOST, "put what a kind needs on its KindSpec:\n" + "\n".join(found)


def test_the_scan_finds_each_form():
    source = '\n'.join([
        'if spec.kind == "sql": pass',
        'if task.kind in ("bash", "python"): pass',
        'if "ctf" != kind: pass',
        'RULES = {"bash": 1, "sql": 2}',
        'kind: Literal["bash", "sql"] = "bash"',
        'if language == "sql": pass',  # a language, not a kind
        'SHELLS = ("bash", "sh")',  # not compared with a kind
    ])
    assert knowing_lines(source) == [1, 2, 3, 4, 5]
