"""The walk of one episode as it really runs: a sweep of one Try Again episode of the oracle on the
first Bash starter task, concurrency 1, run in this process from the command line to its row in
`results.db`, with every call into the project's files recorded (sys.setprofile, this thread). It
is a warm run's: the same sweep runs once untraced before it (images built, the gold cached).

    python -m tests.walk_trace          # the walk: files in the order first entered, and the steps back

A call is a step between files: from the project file nearest the call on the stack (the caller;
none when the event loop started it, as a task's coroutine, or when `foundation/concurrency.py`'s
generic runners did: they run what another file handed them, as the event loop does) into the
project file called. An import is none, and neither is a coroutine going on after an await (it was
called once). It is a **step back** when the file called was entered before (it
had been left: the walk comes back to it), and a **step up** when it goes from a lower layer of the
import contract into a higher one (`pyproject.toml`: orchestrator > agents > environments > tasks >
foundation > icdriver). docs/architecture.md's walk and its figures come from here
(tests/docker/test_traced_walk.py holds them to it).
"""

from __future__ import annotations

import collections
import contextlib
import dis
import importlib
import importlib.util
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from foundation.settings import PROJECT_ROOT

RESUME = dis.opmap["RESUME"]  # where a function's code starts, and where a coroutine goes on after an await
DOC = PROJECT_ROOT / "docs" / "architecture.md"
FIGURES = re.compile(r"\*\*Traced: (\d+) files; (\d+) distinct steps back .*?; (\d+) steps? up\s+the layers\.\*\*", re.S)
# The generic runners (TaskOwner's guard, SharedWork's and all_of's runs): every call they make into
# another file of ours is of a coroutine that file handed them, so it counts as the event loop's.
RUNNERS = "foundation/concurrency.py"
LAYERS = ("orchestrator", "agents", "environments", "tasks", "foundation", "icdriver")
SWEEP = """name = "walk"
output = "{output}"
strategies = ["try_again"]
max_turns = 3
concurrency = 1

[[models]]
name = "oracle"

[[tasks]]
dataset = "starter-bash"
limit = 1
"""


@dataclass
class Trace:
    order: list[str] = field(default_factory=list)  # files in the order first entered
    calls: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)  # (caller, called) -> calls
    back: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)  # of them, into a file entered before

    def up(self) -> list[tuple[str, str]]:
        """Steps from a lower layer into a higher one."""
        return sorted(pair for pair in self.calls if _layer(pair[1]) < _layer(pair[0]))


def _layer(path: str) -> int:
    top = path.split("/", 1)[0]
    return LAYERS.index(top) if top in LAYERS else len(LAYERS)


def _ours(filename: str, root: str) -> str | None:
    """The project-relative path of a file of ours (not a test, not a library), else None."""
    if not filename.startswith(root):
        return None
    relative = filename[len(root):]
    return relative if relative.split("/", 1)[0] in LAYERS else None


@contextmanager
def tracing() -> Iterator[Trace]:
    """Record the calls between the project's files made in this thread while the block runs."""
    trace, root = Trace(), str(PROJECT_ROOT) + "/"
    entered: set[str] = set()
    names: dict[str, str | None] = {}

    def ours(filename: str) -> str | None:
        if filename not in names:
            names[filename] = _ours(filename, root)
        return names[filename]

    importing = 0  # modules being run by an import: what they call is no step of the walk

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal importing
        if frame.f_code.co_name == "<module>":
            importing += {"call": 1, "return": -1}.get(event, 0)
            return
        if event != "call" or importing:
            return
        called = ours(frame.f_code.co_filename)
        if called is None:
            return
        code, at = frame.f_code.co_code, frame.f_lasti
        if code[at] == RESUME and code[at + 1] != 0:  # a coroutine going on after an await: the same call
            return
        caller, back = None, frame.f_back
        while back is not None and caller is None:
            if "/asyncio/" in back.f_code.co_filename:  # the event loop started it: no file of ours called
                break
            caller = ours(back.f_code.co_filename)
            back = back.f_back
        if caller == RUNNERS:  # a task's coroutine (or an iterable) another file handed the runners
            caller = None
        if called not in entered:
            entered.add(called)
            trace.order.append(called)
        elif caller is not None and caller != called:
            trace.back[caller, called] += 1
        if caller is not None and caller != called:
            trace.calls[caller, called] += 1

    sys.setprofile(profile)
    try:
        yield trace
    finally:
        sys.setprofile(None)


def trace_episode(folder: Path) -> Trace:
    """Run the walk's sweep (its output in `folder`) under `tracing`, after the same sweep once
    untraced, so that the trace is a warm run's whatever ran before (images built, the gold's
    result cached)."""
    from orchestrator.cli import main

    for run in ("warm", "traced"):
        sweep = folder / f"{run}.toml"
        sweep.write_text(SWEEP.format(output=folder / run))
        with tracing() if run == "traced" else contextlib.nullcontext(Trace()) as trace:
            code = main(["sweep", str(sweep), "--quiet", "--no-report"])
        assert code == 0, f"the walk's sweep exited {code}"
    return trace


def doc_walk(text: str) -> list[list[str]]:
    """The dotted paths each row of the doc's walk names, in order."""
    section = text[text.index("## One episode through the code"):]
    section = section[:section.index("\n## ")]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    return [re.findall(r"`([a-z_]+(?:\.\w+)+)`", row.rsplit("|", 2)[1]) for row in rows]


def doc_figures(text: str) -> tuple[int, int, int]:
    """The doc's traced figures: files, distinct steps back, steps up the layers."""
    found = FIGURES.search(text)
    assert found, "docs/architecture.md states no traced figures (**Traced: N files; N distinct steps back ...**)"
    files, back, up = map(int, found.groups())
    return files, back, up


def resolve(path: str) -> tuple[str, object]:
    """The module a dotted path is in and the object it names: the longest prefix that imports
    as a module, then attributes. AssertionError naming the path when it does not resolve."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            continue
        found: object = spec
        if parts[cut:]:  # a module named alone is found, not run (orchestrator.__main__)
            found = importlib.import_module(name)
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"{path}: {name} has no {attribute}"
            found = getattr(found, attribute)
        return name, found
    raise AssertionError(f"{path}: no such module")


def file_of(module: str) -> str:
    """A module's file, as the trace names it (`orchestrator/sweep/cli.py`)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return str(Path(spec.origin).relative_to(PROJECT_ROOT))


def out_of_order(rows: list[list[str]], trace: Trace) -> list[str]:
    """Where the doc's walk is not the traced one: a module it names that the trace never entered,
    and a row whose first module the trace entered before the previous row's."""
    found, last = [], -1
    for number, paths in enumerate(rows, 1):
        files = [file_of(resolve(path)[0]) for path in paths]
        found += [f"row {number}: {f} is not on the traced walk" for f in files if f not in trace.order]
        if files[0] in trace.order:
            at = trace.order.index(files[0])
            if at < last:
                found.append(f"row {number}: {files[0]} is entered before the row above's module")
            last = max(last, at)
    return found


def report(trace: Trace) -> str:
    lines = [f"{len(trace.order)} files, {sum(trace.back.values())} calls back into files entered before, "
             f"in {len(trace.back)} distinct steps back; {len(trace.up())} steps up the layers", "", "files, first entered:"]
    lines += [f"  {n:3} {path}" for n, path in enumerate(trace.order, 1)]
    lines += ["", "steps back, most travelled first:"]
    lines += [f"  {count:5}  {caller} -> {called}" for (caller, called), count in trace.back.most_common()]
    lines += ["", "steps up the layers:"] + [f"  {caller} -> {called}" for caller, called in trace.up()]
    return "\n".join(lines)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(report(trace_episode(Path(tmp))))
