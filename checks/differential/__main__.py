"""`python -m checks.differential`: drive the original harness and ours with the same actions.

Builds what is missing (the original's images, ours, the original's venv), runs the suites in
lockstep, prints the report, and ends with one `name: value` line per headline figure. Every
container and image alias it made is removed at the end, however the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

from checks.differential import cases, report
from checks.differential.original_images import IMAGES, ensure_images
from checks.differential.original import ensure_venv, remove_leftovers
from checks.differential.run import CONCURRENCY, run_suites
from environments.runtime import Runtime
from foundation import logs
from foundation.engine import engine
from foundation.settings import PROJECT_ROOT, resolve_data_dir
from orchestrator.images.build import build_images
from tasks import DATASETS


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="differential", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="bash,sql,python,ctf", help="comma-separated kinds (default: all four)")
    parser.add_argument("--sources", default="gold,recording,variant", help="comma-separated: gold, recording, variant")
    parser.add_argument("--limit", type=int, help="at most N episodes per suite (a quick run)")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY["bash"],
                        help=f"Bash suites at once (default {CONCURRENCY['bash']}; they are bound by the CPU)")
    parser.add_argument("--no-self-check", action="store_true", help="run the original once, not twice")
    parser.add_argument("--sql-engine", choices=("mariadb", "mysql8"), default="mariadb",
                        help="how our SQL answers: 'mariadb' (default) as the original side's server does, so that "
                             "what differs is the rules; 'mysql8' as MySQL 8 did (the replay's default)")
    parser.add_argument("--data-dir", help="benchmark data (default: $INTERCODE_DATA_DIR or ../shared/intercode-data)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every turn's answers as JSON lines")
    parser.add_argument("--logs", type=Path, default=PROJECT_ROOT / "runs" / "differential",
                        help="where the original drivers' stderr goes")
    args = parser.parse_args(argv)
    args.env = [e for e in args.env.split(",") if e]
    args.sources = [s for s in args.sources.split(",") if s]
    unknown = set(args.env) - set(cases.ENVS) | set(args.sources) - set(cases.SOURCES)
    if unknown:
        parser.error(f"unknown --env or --sources value: {', '.join(sorted(unknown))}")
    return args


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    logs.configure(0)
    data_dir = resolve_data_dir(args.data_dir)
    suites = await asyncio.to_thread(cases.suites, args.env, args.sources, data_dir, args.limit)
    run_label = f"icdiff-{uuid.uuid4().hex[:8]}"
    args.logs.mkdir(parents=True, exist_ok=True)
    python = await ensure_venv(say)
    originals = sorted({s.dataset if s.kind == "bash" else s.kind for s in suites})
    ours = sorted({DATASETS[s.dataset].image.removeprefix("intercode/") for s in suites})
    async with engine() as docker:
        await ensure_images(docker, [name for name in IMAGES if name in originals], data_dir, say)
        await build_images(ours, data_dir, docker=docker)
        say(f"run {run_label}: {len(suites)} suites, {sum(s.turns for s in suites)} turns")
        try:
            async with Runtime.open(data_dir=data_dir, run_id=run_label) as runtime:
                concurrency = {**CONCURRENCY, "bash": args.concurrency}
                records, failures = await run_suites(suites, runtime, data_dir, python, run_label, args.logs,
                                                     again=not args.no_self_check, concurrency=concurrency,
                                                     progress=say, mysql8=args.sql_engine == "mysql8")
        finally:
            left = await remove_leftovers(docker, run_label, run_label)
            if left:
                say(f"removed {left} containers the original's drivers left")
    if args.json:
        report.write_json(args.json, records)
    print(report.render(records, time.monotonic() - started, failures))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse(None))))
