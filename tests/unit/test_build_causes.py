"""A build that fails says why in its one line: the failing step, and the step's own last word
(apt's `E:` line, though apt writes its coloured `E` and the rest of the line apart)."""

from __future__ import annotations

from orchestrator.images.engine_build import Line, _Watcher


def test_apts_error_line_is_in_the_builds_one_line():
    shown: list[Line] = []
    watcher = _Watcher("task-src", shown.append)
    for piece in ["Step 1/3 : FROM debian:bookworm-slim\n", " ---> a7f06f5bc3c7\n",
                  "Step 2/3 : RUN apt-get install -y no-such-package\n", " ---> Running in 1b2c3d\n",
                  "Reading package lists...", "\n", "\x1b[1;31mE", ": \x1b[0mUnable to locate package no-such-package\n"]:
        watcher.feed({"stream": piece})
    error = watcher.failure("The command '/bin/sh -c apt-get install -y no-such-package' returned a non-zero code: 100")
    assert str(error) == ("building task-src failed at Step 2/3 : RUN apt-get install -y no-such-package: the command "
                          "exited with 100 (E: Unable to locate package no-such-package)")
    assert Line("task-src", "| E: Unable to locate package no-such-package") in shown  # not only with -v


def test_without_an_e_line_the_steps_last_line_is_the_cause():
    watcher = _Watcher("task-src", lambda line: None)
    watcher.feed({"stream": "Step 3/3 : RUN make\n"})
    watcher.feed({"stream": "make: *** No rule to make target 'all'.  Stop."})  # no newline before the end
    error = watcher.failure("The command '/bin/sh -c make' returned a non-zero code: 2")
    assert str(error).endswith("the command exited with 2 (make: *** No rule to make target 'all'. Stop.)")


def test_an_error_line_after_an_unended_progress_line_is_found():
    watcher = _Watcher("task-src", lambda line: None)
    watcher.feed({"stream": "Step 2/3 : RUN apt-get install -y nope\n"})
    watcher.feed({"stream": "Building dependency tree..."})
    watcher.feed({"stream": "E: Unable to locate package nope\n"})
    error = watcher.failure("The command '/bin/sh -c apt-get install -y nope' returned a non-zero code: 100")
    assert str(error).endswith("the command exited with 100 (E: Unable to locate package nope)")


def test_apts_e_and_the_rest_of_its_line_are_joined_though_stdout_comes_between():
    """The engine wraps a step's stderr in its colour: apt's "E" and ": Unable ..." written apart,
    with a stdout line between them (as a loaded CI machine delivered it), are one stderr line."""
    watcher = _Watcher("task-src", lambda line: None)
    for piece in ["Step 2/3 : RUN apt-get install -y nope\n", "Building dependency tree...",
                  "\x1b[91mE\x1b[0m", "\n", "Reading state information...\n",
                  "\x1b[91m: Unable to locate package nope\n\x1b[0m"]:
        watcher.feed({"stream": piece})
    error = watcher.failure("The command '/bin/sh -c apt-get install -y nope' returned a non-zero code: 100")
    assert str(error).endswith("the command exited with 100 (E: Unable to locate package nope)"), str(error)
