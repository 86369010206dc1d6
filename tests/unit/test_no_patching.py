"""No module of the project assigns to an attribute of litellm, openai, httpx or asyncio (or of
their submodules, or of anything imported from them), nor setattr()s one: those libraries are
used as they ship. A static scan of every module of the project, with a negative test that the
scan catches the forms it looks for."""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
GUARDED = ("litellm", "openai", "httpx", "asyncio")
PACKAGES = ("foundation", "tasks", "environments", "agents", "orchestrator", "icdriver", "benchmarks", "tests")


def _guarded(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in GUARDED


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _lazy_guarded(value: ast.expr) -> bool:
    """`lazy("openai")`, `lazy("agents.llm._litellm", "litellm")` (tests/lazy.py): a guarded library, imported later."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "lazy"
            and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and _guarded(a.value) for a in value.args))


def _lazily_bound(node: ast.Assign) -> set[str]:
    """Names an assignment binds to a lazily imported guarded library (`a, b = lazy(...), lazy(...)` too)."""
    pairs = [(target, node.value) for target in node.targets]
    pairs += [(t, v) for target in node.targets if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
              for t, v in zip(target.elts, node.value.elts)]
    return {target.id for target, value in pairs if isinstance(target, ast.Name) and _lazy_guarded(value)}


def violations(source: str, name: str = "<source>") -> list[str]:
    """Lines that assign into (or setattr on) a name bound to something imported from a guarded library."""
    tree = ast.parse(source, name)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if _guarded(a.name)}
        elif isinstance(node, ast.ImportFrom) and _guarded(node.module):
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Assign):
            bound |= _lazily_bound(node)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args and _root(node.args[0]) in bound):
            found.append(f"{name}:{node.lineno}")
        for target in targets:
            for part in ast.walk(target):
                if (isinstance(part, (ast.Attribute, ast.Subscript)) and isinstance(part.ctx, (ast.Store, ast.Del))
                        and _root(part) in bound):
                    found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_of_the_project_assigns_into_litellm_openai_httpx_or_asyncio():
    found = []
    for package in PACKAGES:
        for path in sorted((PROJECT / package).rglob("*.py")):
            if path.name != Path(__file__).name:
                found += violations(path.read_text(), str(path.relative_to(PROJECT)))
    assert not found, f"assignments into a guarded library: {found}"


def test_the_scan_catches_every_form_it_looks_for():
    caught = {
        "import litellm\nlitellm.suppress_debug_info = True": 1,
        "import litellm.main as m\nm._helper = None": 1,
        "from litellm import utils\nutils.f = g\n": 1,
        "from httpx import Cookies\nCookies.extract_cookies = lambda *a: None": 1,
        "import openai\nsetattr(openai.resources, 'x', 1)": 1,
        "import asyncio\nasyncio.events.x += 1\ndel asyncio.y": 2,
        "import litellm\nlitellm.model_cost['m'] = {}": 1,  # item assignment into a module's table
        "import litellm\nx = litellm.completion\nother.attr = 1": 0,
        "import json\njson.x = 1": 0,
        "openai = lazy('openai')\nopenai.api_key = 'k'": 1,  # tests/lazy.py's late import
        "a, litellm = lazy('openai'), lazy('agents.llm._litellm', 'litellm')\nlitellm.x = 1\na.y = 2": 2,
        "j = lazy('json')\nj.x = 1": 0,
    }
    for source, count in caught.items():
        assert len(violations(source)) == count, source
