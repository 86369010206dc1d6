"""Logging set-up: structlog to stderr, warnings and errors only unless asked for more; for a
sweep, also every event as a JSON line in a file of its output directory."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import structlog


def configure(verbosity: int = 0) -> None:
    """0: warnings and errors; 1: info; 2 or more: debug. Console-readable lines on stderr."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="%H:%M:%S"),
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _Stderr())),  # a file by its write and flush
        cache_logger_on_first_use=False,
    )


@contextmanager
def configured(verbosity: int = 0) -> Iterator[None]:
    """`configure(verbosity)` for the block, then the configuration from before (a command run
    in-process, as tests do, leaves logging as it found it)."""
    previous = structlog.get_config()
    configure(verbosity)
    try:
        yield
    finally:
        structlog.configure(**previous)


@contextmanager
def logging_to_file(path: Path, verbosity: int = 0, *, console: bool = True) -> Iterator[None]:
    """For the block: every event (info and up; debug with -vv) as a JSON line in `path`, and on
    stderr warnings and errors (more with -v) as readable lines unless `console` is off."""
    file_level = logging.DEBUG if verbosity >= 2 else logging.INFO
    console_level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = structlog.get_config()
    sink = _Sink(path.open("a", encoding="utf-8", buffering=1))  # line-buffered: a killed sweep keeps its log
    readable = structlog.dev.ConsoleRenderer(colors=False)
    as_json = structlog.processors.JSONRenderer()

    def tee(logger: Any, method: str, event: MutableMapping[str, Any]) -> str | bytes:
        level = logging.getLevelNamesMapping().get(method.upper(), logging.INFO)
        if console and level >= console_level:
            print(readable(logger, method, dict(event)), file=sys.stderr)  # whatever stderr is now
        return as_json(logger, method, event)

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.format_exc_info, tee],
        wrapper_class=structlog.make_filtering_bound_logger(min(file_level, console_level)),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, sink)),  # a file by its write and flush
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        structlog.configure(**previous)
        sink.close()


class _Sink:
    """The log file; a failed write (a full disk) drops the line instead of failing the caller,
    whose work (an episode, the store's own error report) matters more than its log line."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.lost = 0

    def write(self, text: str) -> None:
        try:
            self.file.write(text)
        except OSError:
            self.lost += 1

    def flush(self) -> None:
        try:
            self.file.flush()
        except OSError:
            self.lost += 1

    def close(self) -> None:
        try:
            self.file.close()
        except OSError:
            self.lost += 1


class _Stderr:
    """sys.stderr as it is at each write, not as it was at set-up (a test's capture, a redirect)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()
