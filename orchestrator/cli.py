"""Command-line entry point: `python -m orchestrator <command>`.

Each command lives in its own module and registers itself through `add_parser(subparsers)`,
returning an async handler. This module only parses, runs the handler under asyncio with
SIGTERM turned into cancellation, and turns user mistakes into one clear line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
import sys
from collections.abc import Awaitable, Callable

from foundation import logs
from foundation.errors import UserError
from foundation.stacks import dump_on_signal

Handler = Callable[[argparse.Namespace], Awaitable[int]]

# Each command and the module that registers it. A command line imports only its command's
# module: what the others import (Docker and HTTP clients, the web app, numpy) costs a second,
# and a mistake in a sweep file is one line at once. `--help` and an unknown command import all.
COMMANDS = {
    "images": "orchestrator.images.cli",
    "pool": "orchestrator.pool_cli",
    "validate": "orchestrator.fidelity.validate_cli",
    "replay": "orchestrator.fidelity.replay_cli",
    "sweep": "orchestrator.sweep.cli",
    "export": "orchestrator.store.cli",
    "report": "orchestrator.report.cli",
    "compare": "orchestrator.nightly.cli",
    "nightly": "orchestrator.nightly.cli",
    "view": "orchestrator.view.cli",
    "cluster": "orchestrator.cluster.cli",
    "tasks": "orchestrator.tasks_cli",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv`, with only the subparser of the command it names (all when it
    names none)."""
    parser = argparse.ArgumentParser(
        prog="python -m orchestrator",
        description="InterCode Orchestrator: run and score LLM coding agents in warm Docker containers.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log lines (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    command = next((arg for arg in argv or [] if not arg.startswith("-")), None)
    for name in (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


async def _run_cancellable(handler: Handler, args: argparse.Namespace) -> int:
    """Run the handler; SIGTERM cancels it like Ctrl-C does, so every cleanup path runs; SIGUSR1
    logs what every task waits on (foundation/stacks.py)."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    dump_on_signal(loop)  # kill -USR1: where every task waits, to the log
    try:
        return await handler(args)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGUSR1)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    with logs.configured(args.verbose):
        handler: Handler = args.handler
        try:
            return asyncio.run(_run_cancellable(handler, args))
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (KeyboardInterrupt, asyncio.CancelledError):  # cancellation ends here: the program's top
            print("interrupted: results written so far are kept; the same command continues", file=sys.stderr)
            return 130
