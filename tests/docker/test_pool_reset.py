"""A lease never sees what the previous lease did: files, modes, empty dirs, processes."""

from __future__ import annotations

import asyncio

import pytest

from foundation.pool import ImagePoolConfig, Sandbox

pytestmark = pytest.mark.docker

# Everything an agent can change outside the system directories, with content hashes.
FINGERPRINT = r"""
ls -A /
find /testbed /index.html /root /home /.git /opt /srv -printf '%p %y %m %s %T@ %U:%G %l\n' | sort
find /testbed /root -type f -exec md5sum {} + | sort
"""
# Every process outside this listing's own process group (the driver starts each action in its own).
PROCESSES = r"""
for p in /proc/[0-9]*; do
  read -r _ _ _ _ pgid _ < $p/stat 2>/dev/null || continue
  [ "$pgid" = "$$" ] || { tr '\0' ' ' < $p/cmdline; echo; }
done | sort
"""

MESS = r"""
set -e
echo new > /testbed/created.txt
echo changed >> /testbed/hello.c
rm /testbed/Hello.java
chmod 600 /testbed/dir1/textfile1.txt
mkdir -p /testbed/emptydir /newtop/inner
rm -rf /testbed/dir3
echo secret > /root/.agent_note
mkdir -p /home/agent && touch /home/agent/x
touch -d '2001-01-01' /testbed/FooBar.html
ln -s /etc/passwd /testbed/link
mv /testbed/hello.php /testbed/moved.php
mkdir /tmp && echo tmp > /tmp/scratch
cd /testbed && git add -A >/dev/null && git -c user.name=a -c user.email=a@b commit -qm agent
nohup sleep 1000 >/dev/null 2>&1 &
setsid sleep 999 >/dev/null 2>&1 < /dev/null &
echo done
"""


async def snapshot(sandbox: Sandbox) -> tuple[str, str]:
    files = await sandbox.exec(["bash", "-c", FINGERPRINT], cwd="/")
    procs = await sandbox.exec(["bash", "-c", PROCESSES], cwd="/")
    assert files.exit_code == 0, files.output
    return files.output, procs.output


async def test_changes_of_one_lease_are_gone_in_the_next(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=1, max_size=1)}) as pool:
        async with pool.lease(fs1_image) as first:
            pristine_files, pristine_procs = await snapshot(first)
            result = await first.run(MESS)
            assert result.exit_code == 0 and "done" in result.output, result.output
            dirty_files, dirty_procs = await snapshot(first)
            assert dirty_files != pristine_files
            for _ in range(50):  # a background job may not have exec'd its command yet on a busy machine
                if "sleep 1000" in dirty_procs and "sleep 999" in dirty_procs:
                    break
                await asyncio.sleep(0.1)
                _, dirty_procs = await snapshot(first)
            assert "sleep 1000" in dirty_procs and "sleep 999" in dirty_procs, dirty_procs
            container = first.container_id
        async with pool.lease(fs1_image) as second:
            assert second.container_id == container, "max_size=1: the same container, reset"
            files, procs = await snapshot(second)
            assert files == pristine_files
            assert procs == pristine_procs
            status = await second.run("git status --short")
            assert status.output == "" and status.exit_code == 0
            assert second.cwd == "/"


async def test_system_change_recreates_the_container(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=1)}) as pool:
        async with pool.lease(fs1_image) as first:
            assert (await first.run("echo tampered >> /etc/motd; touch /usr/local/bin/evil")).exit_code == 0
            container = first.container_id
        async with pool.lease(fs1_image) as second:
            assert second.container_id != container
            check = await second.run("test -e /usr/local/bin/evil || echo clean")
            assert check.output.strip() == "clean"


async def test_a_reset_that_fails_unexpectedly_retires_its_container(make_pool, fs1_image):
    """Any error of the background reset (here the upper-dir walk's OSError) retires the container
    and the pool grows again, instead of keeping it `resetting` for good."""
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=0, max_size=1)}) as pool:
        async with pool.lease(fs1_image) as first:
            container = first.container_id
            member = pool._pools[fs1_image].members[container]  # noqa: SLF001 — the pool's own record
            member.upper_dir = "/nonexistent/upper"  # the walk after the reset raises FileNotFoundError
        async with asyncio.timeout(60):
            async with pool.lease(fs1_image) as second:
                assert second.container_id != container
                assert (await second.run("echo ok")).output.strip() == "ok"
