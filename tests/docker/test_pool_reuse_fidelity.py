"""A reused container answers what a fresh one would, for what earlier episodes only touched in
passing: directory sizes (`du`) after files were moved away and back, and the atimes of files that
were read (`find -amin`, `-atime`). Real engine, the fs3 image, one container reset between
episodes against a second, fresh one."""

from __future__ import annotations

import pytest

from foundation.pool import ImagePoolConfig

from tests.conftest import require_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FS3 = "intercode/nl2bash-fs3:latest"
SIZES = "du -a /workspace | sort -k2"
# The image's files are dated at its build (images/common/redate.py), minutes before: a read shows
# in `-amin -1`, not in a fresh container.
READ_LATELY = "find /workspace -amin -1 | sort; echo; find /workspace -type f -atime +1 | sort"
# What earlier episodes did: move every file of the leaf directories away (fs3 #12 on an old
# image), then read every file (what `cat`, `grep -r` and `wc` tasks do).
MOVE_AWAY = "find /workspace/dir1 /workspace/dir2 -type f -exec mv {} / \\;"
READ_ALL = "find /workspace -type f -exec cat {} + > /dev/null"


async def test_a_reused_container_answers_like_a_fresh_one(docker, make_pool):
    await require_image(docker, FS3)
    async with make_pool({FS3: ImagePoolConfig(min_idle=2, max_size=2)}) as pool:
        async with pool.lease(FS3) as used:
            fresh_sizes = (await used.run(SIZES)).output
            fresh_reads = (await used.run(READ_LATELY)).output
            assert (await used.run(MOVE_AWAY)).ok
            assert (await used.run(SIZES)).output != fresh_sizes  # the episode did change them
        async with pool.lease(FS3) as again:
            assert (await again.run(READ_ALL)).ok
            read = (await again.run(READ_LATELY)).output
        async with pool.lease(FS3) as first, pool.lease(FS3) as second:
            # One of the two is the container used twice above, reset after each episode.
            for sandbox in (first, second):
                assert (await sandbox.run(SIZES)).output == fresh_sizes
                assert (await sandbox.run(READ_LATELY)).output == fresh_reads
    assert read != fresh_reads  # reading did change what `find -amin` saw, before the reset
