"""`terminus`: a harness that drives a terminal, as Harbor's reference agent (Terminus-2) does, written
from its published description: the model sees the screen of a tmux session in the task's container
and answers with one JSON object of keystrokes to type, each with a wait, and `task_complete`, which
it confirms once more before the task is scored. Results are comparable with Terminal-Bench's
leaderboard, which most entries report with Terminus-2.

The tmux session lives in the container (the driver's runtime brings tmux: images/runtime), its
socket under /run, and is reached through the driver: each keystroke, wait and screen capture is an
action of the driver's. A wait ends early once the shell is idle again (the pane's foreground
process is the shell). An answer that can't be read as that JSON object runs nothing: the model is
told why. Every answer is a turn; the new output after it is its observation; the dialogue is kept
whole. Then `submit` (the last output is the answer a kind that judges the output reads).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.base import EpisodeOutcome, Message, Model, Turn
from agents.llm.errors import ModelError
from agents.strategies.turns import failed, prompt, skills_block
from agents.strategies.installed import shell_container
from foundation.outcome import Status

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from foundation.sandbox import Sandbox
    from tasks import Task

TMUX = "/usr/lib/intercode/runtime/bin/tmux"
SOCKET = "/run/intercode-tmux/socket"  # under /run: restored by the reset, out of the Bash reward's diff
SESSION = "agent"
WIDTH, HEIGHT = 160, 40
SHELL = "/usr/lib/intercode/bash"
MAX_WAIT = 600.0  # seconds one command's wait may last (the prompt asks for 60 at most)
POLL = 0.05  # seconds between looks at whether the shell is idle
OUTPUT_LIMIT = 10_000  # characters of new output in an observation: its start and its end
KEY = re.compile(r"^(?:[CMS]-\S|Enter|Escape|Tab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown|DC|IC)$")
TIMEOUT = 30.0  # seconds one tmux command through the driver may take
START_WAIT = 10.0  # seconds the shell may take to print its first prompt


@dataclass(frozen=True)
class Keys:
    keystrokes: str
    duration: float


def read_answer(text: str) -> tuple[list[Keys], bool]:
    """An answer's commands and whether it says the task is complete; ValueError says what is
    wrong with it, in words for the model (text around the JSON object is tolerated)."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object was found")
    try:
        parsed, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the JSON object is not valid ({exc.msg} at character {exc.pos})") from None
    if not isinstance(parsed, dict):
        raise ValueError("the answer is not a JSON object")
    commands = parsed.get("commands")
    if not isinstance(commands, list):
        raise ValueError('"commands" is missing or not a list')
    keys = []
    for number, command in enumerate(commands, 1):
        if not isinstance(command, dict) or not isinstance(command.get("keystrokes"), str):
            raise ValueError(f'command {number} has no "keystrokes" text')
        duration = command.get("duration", 1.0)
        if isinstance(duration, bool) or not isinstance(duration, int | float) or not duration >= 0:
            raise ValueError(f'command {number}\'s "duration" is not a number of seconds')
        keys.append(Keys(command["keystrokes"], min(float(duration), MAX_WAIT)))
    complete = parsed.get("task_complete", False)
    return keys, complete is True or (isinstance(complete, str) and complete.lower() == "true")


class Terminal:
    """A tmux session in the container, reached through the driver's exec."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox, self.seen = sandbox, ""

    async def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        result = await self.sandbox.exec([TMUX, "-u", "-S", SOCKET, *args], cwd="/", timeout=TIMEOUT, env=env)
        if result.exit_code != 0:
            raise RuntimeError(f"tmux {args[0]} failed (exit {result.exit_code}): {result.output.strip()[:200]}")
        return result.output

    async def start(self, workdir: str, variables: dict[str, str]) -> None:
        folder = SOCKET.rsplit("/", 1)[0]
        setup = f"mkdir -p {folder} && printf 'set -g history-limit 100000\\nset -g status off\\n' > {folder}/tmux.conf"
        await self.sandbox.exec([SHELL, "-c", setup], cwd="/", timeout=TIMEOUT)
        command = f"cd {shlex.quote(workdir)} 2>/dev/null; exec {SHELL} -i"
        await self._tmux("-f", f"{folder}/tmux.conf", "new-session", "-d", "-s", SESSION, "-x", str(WIDTH), "-y",
                         str(HEIGHT), command, env={**variables, "TERM": "xterm"})
        await self.settle(START_WAIT)  # its first prompt, before anything is typed
        await self.reading(START_WAIT)

    async def reading(self, seconds: float) -> None:
        """Wait up to `seconds` until the shell reads the terminal itself (readline's raw mode, not
        the line discipline's cooked one): a line typed while the terminal is still cooked is cut at
        4,095 characters, and a quiet screen may come before the prompt under load."""
        tty = (await self._tmux("display-message", "-p", "-t", SESSION, "#{pane_tty}")).strip()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            modes = await self.sandbox.exec(["stty", "-F", tty, "-a"], cwd="/", timeout=TIMEOUT)
            if modes.exit_code != 0 or "-icanon" in modes.output.split():
                return  # no stty to ask (a minimal image): the settled screen is all there is to go by
            await asyncio.sleep(POLL)

    async def type(self, keys: Keys) -> None:
        """Type `keys`, then wait its duration, or less once the shell read them and is idle again."""
        if KEY.match(keys.keystrokes):
            await self._tmux("send-keys", "-t", SESSION, keys.keystrokes)
            await self.settle(keys.duration)
            return
        shell = await self.shell_reads()
        for number, line in enumerate(keys.keystrokes.split("\n")):
            if number:
                await self._tmux("send-keys", "-t", SESSION, "Enter")
            if line:
                await self._tmux("send-keys", "-t", SESSION, "-l", line)
        deadline = time.monotonic() + keys.duration
        if shell is not None:
            pid, before = shell
            await self.read_by_shell(pid, before + len(keys.keystrokes.encode()), deadline)
        await self.settle(deadline - time.monotonic())

    async def shell_reads(self) -> tuple[str, int] | None:
        """The pane's shell and the bytes it has read so far (its `rchar`); None when it isn't in
        the foreground (a program reads the keys) or its counters can't be read."""
        if not await self.idle():
            return None
        pid = (await self._tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}")).strip()
        counted = await _read_count(self.sandbox, pid)
        return None if counted is None else (pid, counted)

    async def read_by_shell(self, pid: str, total: int, deadline: float) -> None:
        """Wait until the shell has read `total` bytes (what was typed: readline reads the terminal a
        byte at a time), or a command it started holds the terminal, or the deadline. A shell
        scheduled late shows a quiet screen and an idle pane before it read anything: the wait for a
        quiet screen alone would take that for the command's end."""
        while time.monotonic() < deadline:
            counted = await _read_count(self.sandbox, pid)
            if counted is None or counted >= total or not await self.idle():
                return
            await asyncio.sleep(POLL)

    async def settle(self, seconds: float) -> None:
        """Wait `seconds`, or less: until the shell is idle and the screen stopped changing (a long
        line is echoed slowly; a starting shell prints its prompt late)."""
        deadline = time.monotonic() + seconds
        last = None  # the screen at the last look that found the shell idle
        while time.monotonic() < deadline:
            await asyncio.sleep(min(POLL, max(deadline - time.monotonic(), 0)))
            if not await self.idle():
                last = None
                continue
            screen = await self._tmux("capture-pane", "-p", "-t", SESSION)
            if screen == last and screen.strip():
                return
            last = screen

    async def idle(self) -> bool:
        current = await self._tmux("display-message", "-p", "-t", SESSION, "#{pane_current_command}")
        return current.strip() in ("bash", "sh", "dash", "zsh")

    async def changes(self) -> str:
        """What the terminal printed since the last look; the whole screen when it was redrawn."""
        everything = (await self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION)).rstrip("\n")
        if everything.startswith(self.seen):
            new = everything[len(self.seen):].lstrip("\n")
        else:
            screen = (await self._tmux("capture-pane", "-p", "-J", "-t", SESSION)).rstrip("\n")
            new = f"(the screen was redrawn; it shows:)\n{screen}"
        self.seen = everything
        return _limited(new)


async def _read_count(sandbox: Sandbox, pid: str) -> int | None:
    """The bytes process `pid` has read (`rchar` of /proc/PID/io), or None."""
    result = await sandbox.exec(["cat", f"/proc/{pid}/io"], cwd="/", timeout=TIMEOUT)
    found = re.search(r"^rchar: (\d+)$", result.output, re.MULTILINE) if result.exit_code == 0 else None
    return int(found[1]) if found else None


class Terminus:
    name = "terminus"

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome = EpisodeOutcome(task.id)
        await env.reset(task, multi_turn=True)
        sandbox, workdir = shell_container(env, "the terminus harness")
        terminal = Terminal(sandbox)
        variables: dict[str, str] = dict(getattr(env, "variables", lambda _task: {})(task))
        await terminal.start(workdir, variables)
        screen = await terminal.changes()
        first = prompt("terminus", env.spec, instruction=task.query, terminal=screen or "(empty)")
        messages: list[Message] = [{"role": "user", "content": first + skills_block(env.spec, env.skills())}]
        confirming, ran_out = False, True
        for turn in range(max_turns):
            try:
                text = await model.complete(messages, task=task, turn=turn, style="terminus")
            except ModelError as error:
                return failed(outcome, error)
            messages.append({"role": "assistant", "content": text})
            try:
                keys, complete = read_answer(text)
            except ValueError as problem:
                feedback = prompt("terminus_error", env.spec, error=str(problem))
                outcome.turns.append(Turn(text, None, feedback, 0.0, False))
                messages.append({"role": "user", "content": feedback})
                confirming = False
                continue
            for key in keys:
                await terminal.type(key)
            output = await terminal.changes()
            outcome.turns.append(Turn(text, "".join(k.keystrokes for k in keys) or None, output, 0.0, bool(keys)))
            if complete and confirming:
                ran_out = False
                break
            confirming = complete
            feedback = prompt("terminus_confirm", env.spec, terminal=output) if complete else (output or "(no new output)")
            messages.append({"role": "user", "content": feedback})
        return await _submit(env, outcome, ran_out)


async def _submit(env: EpisodeEnvironment, outcome: EpisodeOutcome, ran_out: bool) -> EpisodeOutcome:
    if hasattr(env, "note"):
        for turn in outcome.turns:
            if turn.executed and turn.action:
                env.note(turn.action.strip(), command_output(turn.action, turn.observation))
    step = await env.step("submit")
    outcome.turns.append(Turn("", "submit", step.observation, step.reward, True, env.breakdown()))
    outcome.status = Status.SOLVED if step.reward == 1.0 else (Status.MAX_TURNS if ran_out else Status.SUBMITTED)
    return outcome


PROMPT = re.compile(r"[$#>%] ?$")


def command_output(keystrokes: str, screen: str) -> str:
    """What the last command printed, out of the terminal's new text: without the line that echoed
    it (the prompt and the command) and the prompt after it (the answer a kind judges by output)."""
    lines = screen.splitlines()
    typed = keystrokes.strip().splitlines()
    if typed:
        echoed = [n for n, line in enumerate(lines) if line.rstrip().endswith(typed[-1].strip()[-40:])]
        lines = lines[echoed[-1] + 1:] if echoed else lines
    if lines and PROMPT.search(lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines) + ("\n" if lines else "")


def _limited(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    half = OUTPUT_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - OUTPUT_LIMIT} characters left out ...]\n{text[-half:]}"

