"""`python -m orchestrator tasks check|init|shell`: the authoring loop for tasks of your own.

    tasks init DIR          a Harbor task folder to start from, which `tasks check` passes
    tasks check DIR         each task built, its oracle and a no-op agent run: one line per task
    tasks shell DIR[/TASK]  a shell in the task's container, as the agent has it

DIR is an environment of your own (a directory with environment.toml) or Harbor task folders (one,
or a folder of them). The checks are orchestrator/tasks_cli/check.py's, the scaffold and the shell
orchestrator/tasks_cli/authoring.py's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from foundation.errors import ConfigError
from orchestrator.tasks_cli.authoring import init_task, open_shell
from orchestrator.tasks_cli.check import check_all, stderr
from orchestrator.tasksets.resolve import of_directory


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("tasks", help="tasks of your own: scaffold one, check that each is solvable and not "
                            "trivial, open a shell in one")
    cmds = parser.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    check = cmds.add_parser("check", help="build each task, run its oracle (must score 1) and an agent that does "
                            "nothing (must score below 1): one line per task")
    check.add_argument("dir", type=Path, metavar="DIR", help="an environment of your own (with environment.toml), "
                       "a Harbor task folder, or a folder of them")
    check.add_argument("--only", action="append", metavar="TASK", help="only this task (its index, or a Harbor "
                       "folder's name); repeatable")
    check.add_argument("--concurrency", type=int, default=4, help="tasks checked at once")
    _internet(check)
    check.set_defaults(handler=run_check)
    init = cmds.add_parser("init", help="a new Harbor task folder (task.toml, instruction.md, environment/, tests/, "
                           "solution/) that `tasks check` passes, to edit into your task")
    init.add_argument("dir", type=Path, metavar="DIR", help="the folder to make (it must not exist, or be empty)")
    init.set_defaults(handler=run_init)
    shell = cmds.add_parser("shell", help="an interactive shell in a task's container, as the agent has it "
                            "(its working directory, variables, limits and network)")
    shell.add_argument("task", type=Path, metavar="DIR[/TASK]", help="a Harbor task folder (or an environment of "
                       "your own: its first task, or --task)")
    shell.add_argument("--task", dest="which", metavar="TASK", help="which task of a folder of them (its name or index)")
    _internet(shell)
    shell.set_defaults(handler=run_shell)


def _internet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-internet", action="store_true", help="Harbor: give the network to tasks whose "
                        "task.toml asks for the internet")
    parser.add_argument("--host-env", action="append", default=[], metavar="NAME", help="Harbor: a variable of "
                        "this machine that the tasks' ${NAME} templates may take (none by default); repeatable")


async def run_check(args: argparse.Namespace) -> int:
    task_set = of_directory(args.dir, allow_internet=args.allow_internet, host_env=args.host_env)
    tasks = [t for t in task_set.tasks if not args.only or str(t.meta.get("name", t.index)) in args.only]
    if not tasks:
        raise ConfigError(f"no task of {args.dir} is named {', '.join(args.only)}")
    for note in task_set.notes:
        if not any(note.startswith(f"{t.name}: ") for t in task_set.tasks):  # a task's own notes are in its line
            stderr(f"note: {note}")
    images = {t.image for t in tasks if t.image and t.unavailable is None}
    stderr(f"{len(tasks)} tasks in {args.dir}; building their {len(images)} images where needed")
    results = await check_all(task_set, tasks, concurrency=args.concurrency, say=stderr)
    counts = {verdict: sum(1 for r in results if r.verdict == verdict) for verdict in ("ok", "warn", "FAIL", "skip")}
    print(f"{len(results)} tasks: {counts['ok']} ok, {counts['warn']} with warnings, {counts['FAIL']} failed, "
          f"{counts['skip']} unavailable here")
    return 1 if counts["FAIL"] or counts["warn"] else 0


async def run_init(args: argparse.Namespace) -> int:
    folder = init_task(args.dir)
    print(f"made {folder}: edit instruction.md, environment/Dockerfile, tests/test.sh and solution/solve.sh, "
          f"then `python -m orchestrator tasks check {folder}`")
    return 0


async def run_shell(args: argparse.Namespace) -> int:
    return await open_shell(args.task, which=args.which, allow_internet=args.allow_internet, host_env=args.host_env)
