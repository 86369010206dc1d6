"""docs/architecture.md stays true: every file its episode walk names exists, no file comes back
once the walk has left it, and the drawing of the parts names every part of the import contract."""

from __future__ import annotations

import re
import tomllib

from foundation.settings import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "architecture.md"


def walk() -> list[list[str]]:
    text = DOC.read_text()
    section = text[text.index("## One episode through the code"):]
    section = section[:section.index("\n## ")]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    return [re.findall(r"`([\w/.]+\.py)`", row.rsplit("|", 2)[1]) for row in rows]


def test_the_walk_names_files_that_exist_and_never_goes_back():
    steps = walk()
    assert len(steps) >= 15 and all(steps), steps
    seen: list[str] = []
    for files in steps:
        for name in files:
            assert (PROJECT_ROOT / name).is_file(), name
            assert name not in seen, f"{name} comes back in the walk"
            seen.append(name)


def test_the_drawing_names_every_part_of_the_contract():
    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    parts = next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("Parts"))
    names = {name.strip() for layer in parts["layers"] for name in re.split(r"[|:]", layer)}
    text = DOC.read_text()
    drawing = text[text.index("## The application's parts"):text.index("## One episode through the code")]
    missing = sorted(name for name in names if not re.search(rf"\b{re.escape(name)}\b", drawing))
    assert not missing, missing
    for name in names:  # each is a module or package of the application
        assert (PROJECT_ROOT / "orchestrator" / name).is_dir() or (PROJECT_ROOT / "orchestrator" / f"{name}.py").is_file()
