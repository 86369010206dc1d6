"""The disk cap: a container that writes past its cap gets ENOSPC inside, and neither the host nor
its neighbours notice; its space comes back with the reset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from foundation.pool import Hardening, ImagePoolConfig
from tasks import load_tasks
from tests.docker.test_sweep import our_containers, rows, sweep, sweep_file

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FILL = "dd if=/dev/zero of=/big bs=1M count=10240"  # 10 GB


def require_cap(mode: str) -> None:
    if mode == "none":
        message = "this engine caps no container's disk (see the README's disk cap section)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


async def test_a_container_past_its_cap_gets_enospc_and_its_neighbour_does_not_notice(make_pool, fs1_image):
    config = ImagePoolConfig(min_idle=0, max_size=2, hardening=Hardening(disk_mb=256))
    async with make_pool({fs1_image: config}) as pool:
        assert pool.disk is not None
        require_cap(pool.disk.mode)
        async with pool.lease(fs1_image) as hostile, pool.lease(fs1_image) as neighbour:
            filled = await hostile.run(FILL.replace("/big", "/testbed/big"), timeout=60)  # reset, not re-created
            assert "No space left on device" in filled.output and filled.exit_code != 0, filled.output
            written = int((await hostile.run("du -sm /testbed/big")).output.split()[0])
            assert 200 <= written <= 256
            # the host lost at most the cap: the layer is a file system of the cap's size, in a sparse file
            # (the host's free space, measured around it, moved with whatever else the machine wrote)
            size = int((await hostile.run("df -m / | tail -1")).output.split()[1])
            assert size <= 256, size
            fine = await neighbour.run("dd if=/dev/zero of=/testbed/x bs=1M count=100 2>&1 && echo written")
            assert "written" in fine.output, fine.output
            hostile_id = hostile.container_id
        async with pool.lease(fs1_image) as first, pool.lease(fs1_image) as second:  # both come back reset
            again = first if first.container_id == hostile_id else second
            assert again.container_id == hostile_id, "max_size=2: the same two containers"
            used = (await again.run("test -e /testbed/big || echo gone; df -m / | tail -1")).output
            assert used.startswith("gone") and int(used.split()[3]) < 50, used  # its space is back


def test_a_hostile_episode_stops_at_its_cap_and_the_neighbours_score_as_the_oracle(tmp_path):
    tasks = load_tasks("starter-bash")
    hostile = tmp_path / "hostile.json"  # every episode writes 10 GB, as its first action
    hostile.write_text(json.dumps({str(t.index): {
        "environment": "ic_bash", "dataset": "starter", "task_id": t.index, "query": t.query,
        "turn_history": {"actions": [FILL], "observations": [""], "rewards": [0], "valid_action": [True]}}
        for t in tasks}))
    models = f'[[models]]\nname = "oracle"\n[[models]]\nname = "replay:{hostile}"\n'
    path = sweep_file(tmp_path, models, concurrency=10, max_turns=1)
    # A small cap: filled in a few seconds even on a loaded machine, well within the action's timeout.
    path.write_text(path.read_text().replace("[[models]]", '[pools]\n"intercode/starter" = { disk_mb = 128 }\n'
                                                           "[[models]]", 1))
    assert sweep(path) == 0
    out = tmp_path / "out"
    assert rows(out, "SELECT model, count(*), sum(success), sum(failure_class IS NOT NULL) FROM episodes "
                     "GROUP BY model ORDER BY model") == [("oracle", 5, 5, 0), (f"replay:{hostile}", 5, 0, 0)]
    observations = rows(out, "SELECT t.observation FROM turns t JOIN episodes e ON e.id = t.episode_id "
                             "WHERE e.model LIKE 'replay:%'")
    assert len(observations) == 5 and all("No space left on device" in o for (o,) in observations), observations
    assert our_containers() == []


def test_the_sweep_file_sets_the_cap_per_image(tmp_path):
    from foundation.errors import ConfigError
    from orchestrator.sweep.config import load_sweep
    from orchestrator.sweep.placing import sweep_pool_configs

    path = sweep_file(tmp_path, '[[models]]\nname = "oracle"\n')
    body = path.read_text()
    path.write_text(body + '[pools]\n"intercode/starter" = { disk_mb = 300, max_size = 3 }\nbash = 5\n'
                           'python = { disk_mb = 0 }\n')
    config, _ = load_sweep(Path(path))
    configs = sweep_pool_configs(config, ["intercode/starter", "intercode/bash", "intercode/python", "intercode/ctf"])
    assert (configs["intercode/starter"].hardening.disk_mb, configs["intercode/starter"].max_size) == (300, 3)
    assert (configs["intercode/bash"].hardening.disk_mb, configs["intercode/bash"].max_size) == (4096, 5)
    assert configs["intercode/python"].hardening.disk_mb is None  # 0: no cap
    assert configs["intercode/ctf"].hardening.disk_mb == 4096
    path.write_text(body + '[pools]\nbash = { disk_mb = 10 }\n')
    with pytest.raises(ConfigError, match="pools.bash.disk_mb: a disk cap under 64 MB"):
        load_sweep(Path(path))
    path.write_text(body + '[pools]\nbash = 0\n')
    with pytest.raises(ConfigError, match="pools.bash.max_size: Input should be greater than or equal to 1"):
        load_sweep(Path(path))


# What a replay of the original's recordings needs (orchestrator/fidelity/original_lifecycle.py): files as old as
# the original's image layer was, ctime included, which only an offline edit of the layer sets.
AGED = "touch -a -d '2 days ago' /testbed/hello.c /testbed/Hello.java; touch -m -d '3 days ago' /testbed/hello.c"
TIMES = "stat -c '%X %Y %Z' /testbed/hello.c /testbed/Hello.java"
CONTENT = "md5sum /testbed/hello.c /testbed/Hello.java"  # a read: after the times were looked at


async def test_set_ctimes_stamps_the_layer_and_leaves_the_rest_as_it_was(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=1)}) as pool:
        assert pool.disk is not None
        require_cap(pool.disk.mode)
        async with pool.lease(fs1_image) as sandbox:
            content = (await sandbox.run(CONTENT)).output
            assert (await sandbox.run(AGED)).ok
            before = (await sandbox.run(TIMES)).output.splitlines()
            stamp = int((await sandbox.run("date +%s")).output) - 5 * 86400
            assert await sandbox.set_ctimes({"/testbed": stamp}) >= 3  # the folder and the two files
            after = (await sandbox.run(TIMES)).output.splitlines()
            assert len(after) == len(before) == 2
            for old, new in zip(before, after):  # each: its atime and mtime as they were, its ctime stamped
                assert new.split()[:2] == old.split()[:2] and int(new.split()[2]) == stamp, (old, new)
            assert (await sandbox.run(CONTENT)).output == content
            assert (await sandbox.run("echo still here")).output == "still here\n"  # a new driver
            assert sandbox.broken  # retired at the lease's end, not reset for the next
