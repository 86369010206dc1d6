"""The terminus harness (Terminus-2's protocol): its answers read as Harbor's reference agent reads
them, without Docker; then, in containers, the oracle and the local model typing into a tmux session
solve the starter Bash tasks and a Harbor folder, each answer a turn with what the terminal printed."""

from __future__ import annotations

import asyncio
import json

import pytest

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from tests.stores import rows

HELLO = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "hello-file"


@pytest.mark.docker
def test_terminus_types_into_a_terminal_and_solves_with_the_oracle_and_the_local_model(tmp_path, capsys):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "terminus"\noutput = "{tmp_path / "out"}"\nstrategies = ["terminus"]\nmax_turns = 5\n'
                     '[[models]]\nname = "oracle"\n'
                     '[[models]]\nname = "openai/sim"\nlocal = { latency = 0.01, solve_rate = 1.0, seed = 2 }\n'
                     f'[[tasks]]\ndataset = "starter-bash"\n[[tasks]]\nharbor = "{HELLO}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    found = rows(out, "SELECT model, task_id, status FROM episodes")
    assert len(found) == 12 and all(status == "solved" for *_, status in found), found
    turns = rows(out, "SELECT t.action, t.observation FROM turns t JOIN episodes e ON e.id = t.episode_id "
                      "WHERE e.task_id = 'starter-bash/0' AND e.model = 'oracle' ORDER BY t.idx")
    assert turns[0][0] == "grep -c ERROR /starter/logs/app.log\n" and turns[0][1].splitlines()[-2:][0].strip() == "2"
    assert [action for action, _ in turns[1:]] == [None, None, "submit"]  # complete, confirmed, then scored
    first = rows(out, "SELECT t.output FROM turns t JOIN episodes e ON e.id = t.episode_id "
                      "WHERE e.model = 'openai/sim' ORDER BY t.idx LIMIT 1")[0][0]
    assert json.loads(first)["commands"]


@pytest.mark.docker
async def test_keys_typed_to_a_shell_that_reads_them_late_are_waited_for(docker, make_pool):
    """A shell busy in itself (here its prompt command waits 3 s) shows an idle pane and a quiet
    screen before it read a byte of what was typed: the terminal waits until it has read them, then
    for the command. (tmux continues a stopped shell at once, so SIGSTOP can't make it late.)"""
    from agents.strategies.terminus import Keys, Terminal
    from foundation.pool.config import Hardening, ImagePoolConfig
    from foundation.settings import cache_dir
    from orchestrator.images.agent_layer import RUNTIME_DIR, extract
    from orchestrator.images.specs import RUNTIME, get
    from tests.conftest import require_image

    image = await require_image(docker, "intercode/starter")
    runtime = await extract(docker, await require_image(docker, get(RUNTIME).tag), RUNTIME_DIR, cache_dir() / "runtime")
    config = ImagePoolConfig(min_idle=0, max_size=1, hardening=Hardening(binds=[f"{runtime}:{RUNTIME_DIR}:ro"]))
    async with make_pool({image: config}) as pool, pool.lease(image) as sandbox:
        terminal = Terminal(sandbox)
        await terminal.start("/", {})
        await terminal.type(Keys("mkfifo /run/late; exec 9<>/run/late; PROMPT_COMMAND='read -t 3 -u 9; PROMPT_COMMAND='\n",
                                 1.0))
        await terminal.changes()
        started = asyncio.get_running_loop().time()
        await terminal.type(Keys("echo " + "x" * 3000 + " | wc -c; echo typed-$((6 * 7))\n", 30.0))
        waited = asyncio.get_running_loop().time() - started
        printed = await terminal.changes()
    assert "3001" in printed.splitlines() and "typed-42" in printed.splitlines(), (waited, printed)
