"""The Sandbox protocol's Docker-free implementation (foundation/local.py: the driver as a local
process) runs the Bash and Python environments' logic and the strategies: no engine is touched
(DOCKER_HOST may point nowhere).

The tasks use relative paths: a local sandbox's "/" is its temporary directory."""

from __future__ import annotations

import os

import pytest

from agents.base import get_strategy
from agents.models import OracleModel
from tests.scripted import ScriptedModel
from environments import make_environment
from environments.runtime import Runtime
from foundation.errors import SandboxError
from foundation.local import MARKER, LocalProvider, LocalSandbox
from foundation.sandbox import Sandbox, TooLarge
from tasks import Task, load_tasks

IMAGE = "local/notes"
SEED = {"notes/a.txt": "alpha\nbeta\n", "notes/b.txt": "gamma\n", "README": "three notes\n"}


def task(gold: str, query: str = "do it", index: int = 0) -> Task:
    return Task(kind="bash", dataset="local-notes", index=index, query=query, gold=gold, image=IMAGE)


@pytest.fixture
async def runtime():
    async with Runtime.local(LocalProvider({IMAGE: SEED})) as runtime:
        yield runtime


async def test_a_local_lease_is_a_sandbox_and_starts_seeded():
    provider = LocalProvider({IMAGE: SEED})
    async with provider.lease(IMAGE) as sandbox:
        assert isinstance(sandbox, Sandbox)
        assert (await sandbox.run("cat notes/a.txt")).output == "alpha\nbeta\n"
        assert (await sandbox.run("cd notes")).ok and sandbox.cwd == "/notes"
        assert (await sandbox.run("ls")).output.split() == ["a.txt", "b.txt"]
        assert (await sandbox.run("sleep 5", timeout=0.3)).timed_out
        root = sandbox.root
    assert not root.exists()  # gone with the lease
    with pytest.raises(SandboxError):
        async with provider.lease(IMAGE) as sandbox:
            raise SandboxError("the service died")
    assert provider.broken == ["the service died"]  # a SandboxError inside marks it broken


async def test_the_local_driver_keeps_a_shell_and_an_interpreter_and_leaves_nothing_behind():
    provider = LocalProvider({IMAGE: SEED})
    async with provider.lease(IMAGE) as sandbox:
        assert (await sandbox.session("cd notes && export N=7")).cwd == "/notes"
        assert (await sandbox.session("echo $N; ls")).output.split() == ["7", "a.txt", "b.txt"]
        await sandbox.session("sleep 300 &")  # a background job of the persistent shell
        run = await sandbox.python(["x = 6", "print(x * 7)"])
        assert [r.output for r in run.results] == ["", "42"]
        assert (await sandbox.python(["print(x)"])).results[0].output == "6"  # the state is kept
        marker = f"{MARKER}={sandbox.root.name}".encode()
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and _marked(pid, marker)]


def _marked(pid: str, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return marker in environ.read().split(b"\0")
    except OSError:
        return False


async def test_the_python_environment_runs_on_a_local_sandbox():
    task = load_tasks("starter-python")[0]
    async with Runtime.local(LocalProvider()) as runtime:
        async with make_environment("python", runtime) as env:
            outcome = await get_strategy("try_again").run(env, task, OracleModel(), max_turns=3)
            assert outcome.success, outcome
            await env.reset(task)
            step = await env.harness_step("def wrong(*args):\n    return None")
            assert step.reward < 1.0 and step.observation


async def test_the_bash_reward_runs_on_a_local_sandbox(runtime):
    gold = task("cat notes/*.txt | wc -l")
    async with make_environment("bash", runtime) as env:
        await env.reset(gold)
        assert (await env.step("cat notes/a.txt notes/b.txt | wc -l")).observation.strip() == "3"
        assert (await env.score())[0] == 1.0
        await env.step("rm notes/b.txt")  # a change the gold did not make: the file-system term drops
        reward, info = await env.score()
        assert reward < 1.0 and info["diff_extra"]
    change = task("echo delta > notes/c.txt", index=1)  # a new file: the original compared its content
    async with make_environment("bash", runtime) as env:
        await env.reset(change)
        await env.step("echo wrong > notes/c.txt")
        wrong, _ = await env.score()
        await env.reset(change)
        await env.step("echo delta > notes/c.txt")
        right, _ = await env.score()
    assert wrong < right == 1.0


@pytest.mark.parametrize("strategy", ["single", "try_again", "react", "plan_solve", "try_again_fenced", "react_fenced"])
async def test_every_strategy_solves_with_the_oracle_on_a_local_sandbox(runtime, strategy):
    gold = task("grep -c a notes/a.txt", query="How many lines of notes/a.txt hold an a?")
    async with make_environment("bash", runtime) as env:
        outcome = await get_strategy(strategy).run(env, gold, OracleModel(), max_turns=3)
    assert outcome.success, outcome


async def test_try_again_feeds_back_and_scores_every_turn_on_a_local_sandbox(runtime):
    gold = task("grep -c a notes/a.txt")
    model = ScriptedModel(["```bash\nwc -l notes/a.txt\n```", "no code here", "```bash\ngrep -c a notes/a.txt\n```"])
    async with make_environment("bash", runtime) as env:
        outcome = await get_strategy("try_again_fenced").run(env, gold, model, max_turns=5)
    rewards = [turn.reward for turn in outcome.turns]
    assert len(rewards) == 3 and rewards[1] == 0.0 and 0 < rewards[0] < 1 and rewards[2] == 1.0
    assert outcome.turns[1].action is None and not outcome.turns[1].executed


async def test_files_handed_out_are_counted_before_they_are_read():
    async with LocalProvider({IMAGE: SEED}).lease(IMAGE) as sandbox:
        assert await sandbox.get("/notes", most=100) == {"a.txt": b"alpha\nbeta\n", "b.txt": b"gamma\n"}
        assert await sandbox.get("/nothing", most=100) == {}
        assert (await sandbox.run("truncate -s 1G notes/sparse")).ok  # a gigabyte of no disk
        with pytest.raises(TooLarge) as raised:
            await sandbox.get("/notes", most=100)
        assert raised.value.seen > 1 << 30


def test_the_local_sandbox_satisfies_the_protocol_statically():
    sandbox: Sandbox = LocalSandbox.__new__(LocalSandbox)  # the protocol is the type environments use
    assert callable(sandbox.mark_broken)
