"""Logging set-up: structlog to stderr, warnings and errors only unless asked for more."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(verbosity: int = 0) -> None:
    """0: warnings and errors; 1: info; 2 or more: debug. Console-readable lines on stderr."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="%H:%M:%S"),
                    structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
