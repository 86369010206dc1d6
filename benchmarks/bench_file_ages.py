"""`just bench-file-ages DEB`: the two ways of replaying a recording at the file ages it saw, side
by side, in leased containers of NL2Bash file system 3.

- **Aging the files** (what `replay` does, environments/file_ages.py): once per container, one
  exec that re-dates the file system's files; the actions then run as they are. In the original
  lifecycle, that plus putting the access times back after git's index refresh.
- **libfaketime** (Debian's `libfaketime`, `apt-get install faketime libfaketime`): nothing to do
  per container but, in every action and gold, an LD_PRELOAD'ed library with a clock set to the
  recording's (`FAKETIME=@...`, `NO_FAKE_STAT=1` so that stored file times are not moved).

Measured alternately, for the same commands: a plain action, the action under libfaketime, the
aging of one container, and what libfaketime adds to the image (the .deb's installed size). DEB
is Debian's libfaketime .deb (`apt-get download libfaketime`); its library is handed into the
containers, never installed in an image. Ends with one `name: value` line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import subprocess
import tarfile
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from environments.file_ages import META, FileAges, age_files, age_repository
from environments.runtime import Runtime
from foundation.logs import configure
from foundation.pool import Sandbox
from tasks import load_tasks

IMAGE = "intercode/nl2bash-fs3"
LIB_DIR = "/opt/faketime"
ACTIONS = ("find /workspace -type f -mtime -7", "ls -lt /workspace", "du -a /workspace | sort -nr | head -3")
DAY_NS = 86400 * 10**9


def library(deb: Path) -> tuple[bytes, int]:
    """libfaketime.so.1 from the .deb, as a tar to hand in, and the .deb's installed size in bytes."""
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["dpkg-deb", "-x", str(deb), scratch], check=True)
        size = int(subprocess.run(["dpkg-deb", "-f", str(deb), "Installed-Size"], check=True, capture_output=True,
                                  text=True).stdout.strip()) * 1024
        lib = next(Path(scratch).rglob("libfaketime.so.1"))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(lib, arcname="libfaketime.so.1")
        return buffer.getvalue(), size


async def timed(fn) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def run(deb: Path, data_dir: Path, rounds: int) -> None:
    lib, installed = library(deb)
    task = load_tasks("nl2bash-fs3", data_dir)[0]
    ages = FileAges(("/workspace", "/backup"), time.time_ns(), 5 * DAY_NS, -3 * 365 * DAY_NS)
    aged = replace(task, meta={**task.meta, META: ages.as_meta()})
    fake = {"LD_PRELOAD": f"{LIB_DIR}/libfaketime.so.1", "FAKETIME": "@2023-06-02 14:00:00", "NO_FAKE_STAT": "1"}
    plain: list[float] = []
    faked: list[float] = []
    aging: list[float] = []
    lifecycle: list[float] = []
    async with Runtime.open(data_dir=data_dir) as runtime:
        for _ in range(rounds):
            async with runtime.pool.lease(IMAGE) as sandbox:
                aging.append(await timed(lambda s=sandbox: age_files(s, aged)))
                await sandbox.put(LIB_DIR, lib)
                for action in ACTIONS:
                    plain.append(await timed(lambda a=action, s=sandbox: _bash(s, a)))
                    faked.append(await timed(lambda a=action, s=sandbox: _bash(s, a, fake)))
            async with runtime.pool.lease(IMAGE) as sandbox:
                lifecycle.append(await timed(lambda s=sandbox: age_repository(s, aged, "/")))
    p50 = {name: statistics.median(values) * 1e3 for name, values in
           (("action", plain), ("action_libfaketime", faked), ("aging", aging), ("aging_lifecycle", lifecycle))}
    print(f"NL2Bash fs3, {rounds} containers, actions {', '.join(ACTIONS)} (medians):")
    print(f"  an action                                  {p50['action']:8.2f} ms")
    print(f"  the same action under libfaketime          {p50['action_libfaketime']:8.2f} ms "
          f"(+{p50['action_libfaketime'] - p50['action']:.2f} ms per action and per gold run)")
    print(f"  aging a container's files (once)           {p50['aging']:8.2f} ms")
    print(f"  ... with the original lifecycle's refresh   {p50['aging_lifecycle']:8.2f} ms")
    print(f"  libfaketime in the image                   {installed / 1024:8.0f} KiB (the .deb's installed size)")
    for name, value in p50.items():
        print(f"file_ages_{name}_ms: {value:.2f}")
    print(f"file_ages_libfaketime_kib: {installed / 1024:.0f}")


async def _bash(sandbox: Sandbox, action: str, env: dict[str, str] | None = None) -> None:
    result = await sandbox.exec(["bash", "-c", action], cwd="/", env=env, timeout=30)
    if result.exit_code != 0:
        raise RuntimeError(f"{action!r} failed: {result.output[-200:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("deb", type=Path, help="Debian's libfaketime .deb (apt-get download libfaketime)")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "intercode-data")
    parser.add_argument("--rounds", type=int, default=20, help="containers leased (3 actions each)")
    args = parser.parse_args()
    configure(0)
    asyncio.run(run(args.deb, args.data_dir, args.rounds))


if __name__ == "__main__":
    main()
