"""The driver's persistent Python interpreter (op `python`), through a real pool and container."""

from __future__ import annotations

import aiodocker
import pytest

from foundation.pool import ActionLimits, ImagePoolConfig
from tests.conftest import require_image

pytestmark = pytest.mark.docker
PY = "intercode/python"


@pytest.fixture
async def pool(make_pool, docker: aiodocker.Docker):
    await require_image(docker, PY)
    async with make_pool({PY: ImagePoolConfig(min_idle=1, max_size=1)},
                         limits=ActionLimits(timeout=5, output_cap=64 * 1024)) as pool:
        yield pool


async def test_state_persists_across_calls(pool) -> None:
    async with pool.lease(PY) as sandbox:
        first = await sandbox.python(["x = 41", "def f(y):\n    return y + 1"])
        assert not first.restarted and [r.raised for r in first.results] == [False, False]
        run = await sandbox.python(["print(f(x))"])
        assert (run.results[0].output, run.results[0].error) == ("42", "")


async def test_output_and_errors_are_captured_like_the_original(pool) -> None:
    async with pool.lease(PY) as sandbox:
        run = await sandbox.python([
            "print('  padded  ')",
            "import sys; sys.stderr.write('warned\\n')",
            "print('lost'); 1/0",
            "x = ",
            "import os; os.system('echo not captured')",
            "print(sys.version_info[0], StringIO.__name__)",  # names the original's namespace had
            "sys.exit(3)",
        ])
        padded, warned, raised, syntax, system, names, exited = run.results
        assert (padded.output, padded.error, padded.raised) == ("padded", "", False)
        assert (warned.output, warned.error) == ("", "warned")
        assert (raised.raised, raised.error, raised.output) == (True, "Error: division by zero", "lost")
        assert syntax.raised and syntax.error == "Error: invalid syntax (<string>, line 1)"
        assert (system.output, system.raised) == ("", False)
        assert names.output == "3 StringIO"
        assert (exited.raised, exited.error) == (True, "Error: 3")
        after = await sandbox.python(["print('still here')"])
        assert after.results[0].output == "still here" and not after.restarted


async def test_runaway_code_is_killed_and_the_interpreter_restarted(pool) -> None:
    async with pool.lease(PY) as sandbox:
        await sandbox.python(["x = 1"])
        run = await sandbox.python(["while True: pass", "print('never')"], timeout=1)
        looped, skipped = run.results
        assert looped.timed_out and looped.raised and "timed out after 1 s" in looped.error
        assert looped.elapsed < 10  # the timeout's 1 s, not forever
        assert skipped.raised and "not run" in skipped.error
        again = await sandbox.python(["print(x)"])
        assert again.restarted, "the next call says the interpreter is a new one"
        assert again.results[0].error == "Error: name 'x' is not defined"
        drivers = await sandbox.exec(["sh", "-c", "grep -l 'icdrive[r]' /proc/[0-9]*/cmdline | wc -l"])
        assert drivers.output.strip() == "2", "the driver and the new interpreter: the looping one is gone"


async def test_an_exiting_interpreter_is_replaced(pool) -> None:
    async with pool.lease(PY) as sandbox:
        run = await sandbox.python(["import os; os._exit(7)"])
        assert run.results[0].died and "status 7" in run.results[0].error
        again = await sandbox.python(["import os\nif os.fork() == 0:\n    print('child')\nelse:\n    os.wait()"
                                      "\n    print('parent')"])
        assert again.restarted and again.results[0].output == "parent", "only the interpreter itself answers"
        assert (await sandbox.python(["print(1)"])).results[0].output == "1"


async def test_output_is_capped(pool) -> None:
    async with pool.lease(PY) as sandbox:
        run = await sandbox.python(["print('x' * 100000)"], cap=1000)
        result = run.results[0]
        assert result.omitted == 100001 - 1000
        assert result.output == "x" * 1000 + f"\n[output truncated: {result.omitted} characters omitted]"


async def test_named_interpreters_are_separate_and_close(pool) -> None:
    async with pool.lease(PY) as sandbox:
        await sandbox.python(["x = 'main'"])
        gold = await sandbox.python(["print(x)"], name="gold", fresh=True, close=True)
        assert gold.results[0].error == "Error: name 'x' is not defined"
        assert (await sandbox.python(["print(x)"])).results[0].output == "main"
        fresh = await sandbox.python(["print(x)"], fresh=True)
        assert fresh.results[0].error == "Error: name 'x' is not defined" and not fresh.restarted


async def test_state_is_gone_after_the_pool_reset(pool) -> None:
    async with pool.lease(PY) as sandbox:
        first_container = sandbox.container_id
        await sandbox.python(["secret = 42"])
    async with pool.lease(PY) as sandbox:
        assert sandbox.container_id == first_container, "the same container, reset in between"
        run = await sandbox.python(["print(secret)"])
        assert run.results[0].error == "Error: name 'secret' is not defined"
        assert not run.restarted, "a reset is a new episode, not a lost interpreter"
