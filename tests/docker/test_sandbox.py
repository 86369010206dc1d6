"""Actions through the driver: the original's fresh `bash -c` with cd tracked, or one persistent shell."""

from __future__ import annotations

import pytest

from foundation.errors import SandboxError
from foundation.pool import ImagePoolConfig

pytestmark = pytest.mark.docker


@pytest.fixture
async def pool(make_pool, fs1_image):
    async with make_pool({fs1_image: ImagePoolConfig(min_idle=1, max_size=2)}) as pool:
        yield pool


async def test_fresh_shell_per_action_with_cd_tracked(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        assert (await sandbox.run("cd testbed/dir1")).ok
        assert sandbox.cwd == "/testbed/dir1"
        assert (await sandbox.run("pwd")).output == "/testbed/dir1\n"
        assert (await sandbox.run("X=1; echo ${X}")).output == "1\n"
        assert (await sandbox.run("echo ${X:-unset}")).output == "unset\n", "no state between actions"
        failed = await sandbox.run("cd /does/not/exist")
        assert failed.exit_code != 0 and sandbox.cwd == "/testbed/dir1"
        assert (await sandbox.run("cd ..")).ok and sandbox.cwd == "/testbed"
        result = await sandbox.run("echo out; echo err >&2; exit 7")
        assert (result.exit_code, result.output) == (7, "out\nerr\n")


async def test_persistent_session_keeps_state(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        await sandbox.session("cd /testbed && export GREETING=hi && f() { echo \"f:$1\"; }")
        result = await sandbox.session("echo $GREETING; f x; pwd")
        assert result.output == "hi\nf:x\n/testbed\n"
        assert sandbox.cwd == "/testbed"
        assert (await sandbox.session("false")).exit_code == 1
        timed = await sandbox.session("sleep 30", timeout=1)
        assert timed.timed_out
        assert (await sandbox.session("echo ${GREETING:-gone}")).output == "gone\n", "a killed session starts anew"


async def test_sandbox_refuses_use_after_its_lease(pool, fs1_image):
    async with pool.lease(fs1_image) as sandbox:
        pass
    with pytest.raises(SandboxError, match="after its lease"):
        await sandbox.run("true")


async def test_hardening_is_applied(pool, fs1_image, docker):
    async with pool.lease(fs1_image) as sandbox:
        info = await docker.containers.container(sandbox.container_id).show()
        host = info["HostConfig"]
        assert host["NetworkMode"] == "none" and not host["Privileged"]
        assert host["PidsLimit"] == 512 and host["Memory"] == 1024 << 20 and host["NanoCpus"] == 10**9
        assert "MKNOD" in host["CapDrop"] and "no-new-privileges" in host["SecurityOpt"]
        assert (await sandbox.run("hostname")).output == "intercode\n"
        net = await sandbox.run("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
        assert net.output.split() == ["lo"], "no interface but loopback"


async def test_a_service_beside_the_agent_gets_the_agents_limits(docker):
    """A task's service is a stranger's code too: the processes, memory and CPUs of the agent's
    container beside it (issue 45: services had no memory or CPU limit)."""
    from foundation.pool.config import ServiceSpec
    from foundation.pool.group import start_group

    service = ServiceSpec(name="sidecar", image="debian:bookworm-slim", command=["sleep", "300"])
    group = await start_group(docker, "intercode/limits-test", [service], {"intercode.test": "limits"}, internet=False,
                              pids=256, memory_mb=300, cpus=0.5)
    try:
        info = await docker.containers.container(group.containers["sidecar"]).show()
        host = info["HostConfig"]
        assert (host["PidsLimit"], host["Memory"], host["MemorySwap"], host["NanoCpus"]) == (
            256, 300 << 20, 300 << 20, 5 * 10**8), host
    finally:
        await group.remove()
