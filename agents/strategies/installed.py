"""An agent installed in the task's container (a CLI agent: mini-swe-agent, Claude Code, Codex CLI)
run as a strategy: its command runs in the container with the task's instruction, its model calls
reach the sweep's model through the LLM gateway, and when it exits (or its time is up) the task
is scored as usual.

The container keeps no network. The gateway's unix socket is mounted into it (with this module's
proxy script beside it, /run/intercode-gateway); the proxy, on the driver's own runtime, listens on
the container's loopback and passes each connection to the socket, so the agent's SDK reaches
http://127.0.0.1:PORT. The agent is given this episode's token as its API key, never a provider's.

Its model calls are its turns: each call's answer, with the tool calls in it, and what the agent
sent back for them (the next call's tool results) are the episode's turns; the last output it saw
is the answer a kind that judges the output reads (the Bash reward). Then its run is one turn (the
command, its exit status and the tail of its output, and the files the declaration keeps), then
`submit`. An offline model (the oracle, the local simulated one) answers in the kind's terms; its
answers are put in the agent's (its tool, and its command for being done).

What the task offers its agent is handed over before the command runs: its MCP servers as a
configuration file in the common form (`{"mcpServers": {NAME: {"type": "http" | "sse", "url": ...}}}`,
the URLs as the container reaches them) at $INTERCODE_MCP_CONFIG, and its skills copied (each
skill's folder, with its SKILL.md) into the agent's skills folder (the declaration's `skills_dir`,
else the scratch folder's `skills`), named by $INTERCODE_SKILLS_DIR. Neither variable is set for a
task that offers none.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.base import EpisodeOutcome, Model, ToolCall, Turn
from agents.own import Answer
from agents.strategies.turns import failed
from agents.strategies.external import Doors, ModelHandle
from environments.base import Skill, TaskUnavailable, ToolServer
from environments.kind import KindSpec
from foundation.outcome import Status
from foundation.sandbox import files_tar

if TYPE_CHECKING:
    from environments.base import EpisodeEnvironment
    from foundation.sandbox import Sandbox
    from tasks import Task

AGENTS_DIR = "/usr/lib/intercode/agents"  # each installed agent's files, mounted read-only at AGENTS_DIR/NAME
GATEWAY_DIR = "/run/intercode-gateway"  # the gateway's socket and the proxy script, mounted
RUNTIME_PYTHON = "/usr/lib/intercode/runtime/bin/python3"
SHELL = "/usr/lib/intercode/bash"
SCRATCH = "/root/.intercode-agent"  # its home and output: restored by the reset, left out of the Bash reward's diff
USER_SCRATCH = "/tmp/.intercode-agent"  # the same, for an agent run as a user of the image's other than root
FLOOD = 8 << 20  # bytes an agent may print before it is stopped
TAIL = 4000  # characters of its output kept with the episode
KEPT = 64 << 10  # characters of each file it names that are kept
DEFAULT_TIME = 600.0  # seconds an agent may run when neither the task, the declaration nor the sweep says
MCP_CONFIG = f"{SCRATCH}/mcp.json"  # the task's MCP servers, for the agent ($INTERCODE_MCP_CONFIG)
SKILLS_DIR = f"{SCRATCH}/skills"  # where the task's skills are copied when the declaration names no folder
END = re.compile(r"\[intercode: exit (-?\d+), (\d+) bytes\]\s*$")
REMINDER = re.compile(r"\n*<system-reminder>.*?</system-reminder>\n*", re.DOTALL)  # Claude Code's own notes
# Codex CLI's exec_command result: "Chunk ID: .. / Wall time: .. / Process exited with code N /
# Original token count: N / Output:", then what the command printed
EXEC_HEADER = re.compile(r"\AChunk ID: [^\n]*\n(?:[^\n]*\n){0,6}?Output:\n")
NOTHING_PRINTED = frozenset({"(Bash completed with no output)"})  # Claude Code's, for an empty output
FENCED_SUBMIT = re.compile(r"```[\w+-]*\n\s*submit\s*\n```")


@dataclass(frozen=True)
class InstalledAgent:
    """An agent installed in the task's container, as a sweep file declares it ([[agents]])."""

    name: str
    command: str  # run by bash in the task's working directory; $INSTRUCTION holds the task
    env: Mapping[str, str] = field(default_factory=dict)
    tool: str = "bash"  # the agent's tool for commands, and its argument: how offline models call it
    argument: str = "command"
    finish: str = ""  # the command by which it says it is done (what offline models answer last)
    keep: tuple[str, ...] = ()  # files it writes, kept with the episode
    timeout: float | None = None  # seconds it may run (at most a Harbor task's agent timeout; else that, else `sweep_time`)
    sweep_time: float = DEFAULT_TIME  # the sweep's: its episode's time, less a minute for the scoring
    skills_dir: str = ""  # where the agent reads skills (its shell expands it: "$HOME/.claude/skills"); "": SKILLS_DIR

    @property
    def home(self) -> str:
        return f"{AGENTS_DIR}/{self.name}"


@dataclass(frozen=True)
class AgentRun:
    """What the agent's command did: its exit status, its output's tail and size, its kept files."""

    exit_code: int
    tail: str
    size: int
    timed_out: bool
    files: dict[str, str]

    def problem(self, *, called: bool) -> str:
        """Why its work can't be scored ("" when it can). `called`: whether it made a model call. An
        agent that never reached its model never ran: whatever its exit, that is its failure, never
        a score of the model's."""
        if self.size > FLOOD:
            return f"the agent printed more than {FLOOD >> 20} MB and was stopped"
        if self.exit_code in (126, 127) and not self.timed_out:
            return f"the agent's command could not start (exit {self.exit_code}): {_last_line(self.tail)}"
        if not called:
            how = "its time was up" if self.timed_out else f"it exited with status {self.exit_code}"
            return f"{how} before its first model call: {_last_line(self.tail)}"
        return ""


class InstalledStrategy:
    """The Strategy protocol over an agent installed in the container; `doors`: the gateway."""

    def __init__(self, agent: InstalledAgent, doors: Doors) -> None:
        self.agent, self.doors, self.name = agent, doors, agent.name

    async def run(self, env: EpisodeEnvironment, task: Task, model: Model, *, max_turns: int) -> EpisodeOutcome:
        outcome = EpisodeOutcome(task.id)
        await env.reset(task, multi_turn=True)
        sandbox, workdir = shell_container(env, "an installed agent")
        user, scratch, owner = await _whose(sandbox, env)
        offered = await hand_over(sandbox, env.tool_servers(), env.skills(), self.agent.skills_dir, scratch, owner)
        handle = ModelHandle(model, task, rewrite=self._own_terms, max_calls=max_turns)
        door = self.doors.open(handle, container=sandbox.container_id)  # its token works from that container alone
        try:
            run = await self._launch(sandbox, workdir, task, door.access.api_key, max_turns, offered, user, scratch)
        finally:
            door.close()
        outcome.turns += steps(handle.log)
        outcome.turns.append(Turn(run.tail, self.agent.command, f"exit status {run.exit_code}"
                                  + (" (its time was up)" if run.timed_out else ""), 0.0, True,
                                  {"exit_status": run.exit_code, "timed_out": run.timed_out, **run.files}))
        if handle.failure is not None:
            return failed(outcome, handle.failure)
        if problem := run.problem(called=bool(handle.log)):
            outcome.status, outcome.error = Status.AGENT_ERROR, f"{self.name}: {problem}"
            return outcome
        if hasattr(env, "note"):
            for turn in outcome.turns[:-1]:
                if turn.executed and turn.action:
                    env.note(turn.action, turn.observation)
        step = await env.step("submit")
        outcome.turns.append(Turn("", "submit", step.observation, step.reward, True, env.breakdown()))
        outcome.status = Status.SOLVED if step.reward == 1.0 else Status.SUBMITTED
        return outcome

    async def _launch(self, sandbox: Sandbox, workdir: str, task: Task, token: str, max_turns: int,
                      offered: dict[str, str], user: str | None = None, scratch: str = SCRATCH) -> AgentRun:
        agent = self.agent
        # its own time, within the task's (a Harbor task's agent timeout bounds any agent), else the sweep's
        given = [t for t in (agent.timeout, task.meta.get("agent_timeout")) if t]
        timeout = float(min(given)) if given else agent.sweep_time
        env = {"INSTRUCTION": task.query, "MAX_TURNS": str(max_turns), "OPENAI_API_KEY": token,
               "ANTHROPIC_API_KEY": token, "HOME": f"{scratch}/home", "TMPDIR": f"{scratch}/tmp",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", **agent.env, **offered}
        script = (f"mkdir -p {scratch}/home {scratch}/tmp && port=$({RUNTIME_PYTHON} -I {GATEWAY_DIR}/proxy.py "
                  f"{GATEWAY_DIR}/gateway.sock) || exit 125\n"
                  f"export OPENAI_BASE_URL=http://127.0.0.1:$port/v1 OPENAI_API_BASE=http://127.0.0.1:$port/v1 "
                  f"ANTHROPIC_BASE_URL=http://127.0.0.1:$port "
                  f"PATH={agent.home}/bin:{agent.home}/npm/node_modules/.bin:{agent.home}/node/bin:$PATH\n"
                  f"cd {shlex.quote(workdir)} && ( {agent.command}\n) < /dev/null 2>&1 | head -c {FLOOD + 1} "
                  f"> {scratch}/output.txt; status=${{PIPESTATUS[0]}}\n"
                  f"tail -c {TAIL} {scratch}/output.txt; echo; echo \"[intercode: exit $status, "
                  f"$(wc -c < {scratch}/output.txt) bytes]\"; exit $status")
        result = await sandbox.exec([SHELL, "-c", script], cwd=workdir, timeout=timeout, env=env, cap=2 * TAIL + 200,
                                    user=user)
        found = END.search(result.output)
        tail = result.output[: found.start()] if found else result.output
        size = int(found.group(2)) if found else 0
        return AgentRun(result.exit_code, tail.rstrip("\n")[-TAIL:], size, result.timed_out,
                        await _kept(sandbox, tuple(_moved(path, scratch) for path in agent.keep)))

    def _own_terms(self, answer: Answer, tools: Sequence[dict[str, Any]] | None) -> Answer:
        """An answer that calls tools the agent did not offer (an offline model answers in the
        kind's: its tool, `submit`) in the agent's own: its tool, and its command for being done."""
        if not tools:
            return Answer(FENCED_SUBMIT.sub(f"```bash\n{self.agent.finish}\n```", answer.text), answer.tool_calls) \
                if self.agent.finish else answer
        offered = {str((t.get("function") or {}).get("name")) for t in tools}
        if all(call.name in offered for call in answer.tool_calls):
            return answer
        # One call an answer, as an agent's model would make it: each action's output is then sent
        # back with the next call, where its steps are read.
        call = answer.tool_calls[0]
        if call.name == "submit" and not self.agent.finish:  # done: an answer without a call
            return Answer(answer.text or "Done.")
        command = self.agent.finish if call.name == "submit" else _first_text(call.arguments)
        return Answer(answer.text, (ToolCall(call.id, self.agent.tool, json.dumps({self.agent.argument: command})),))


async def hand_over(sandbox: Sandbox, servers: list[ToolServer], skills: list[Skill],
                    skills_dir: str, scratch: str = SCRATCH, owner: str | None = None) -> dict[str, str]:
    """Give the agent what the task offers, in its container: the MCP configuration written, the
    skills copied (under `scratch`, made `owner`'s: "UID:GID"); the variables that say where
    (INTERCODE_MCP_CONFIG, INTERCODE_SKILLS_DIR)."""
    offered = {}
    if servers:
        config = json.dumps(mcp_config(servers), indent=1).encode()
        await sandbox.put(scratch, files_tar({MCP_CONFIG.rsplit("/", 1)[1]: config}))
        offered["INTERCODE_MCP_CONFIG"] = _moved(MCP_CONFIG, scratch)
    if skills:
        result = await sandbox.exec([SHELL, "-c", skills_script(skills, skills_dir or _moved(SKILLS_DIR, scratch))],
                                    cwd="/", timeout=60.0, env={"HOME": f"{scratch}/home"}, cap=4096)
        if result.exit_code != 0:
            raise TaskUnavailable(f"the task's skills could not be copied for the agent: {_last_line(result.output)}")
        offered["INTERCODE_SKILLS_DIR"] = result.output.strip()
    if owner is not None and (servers or skills):
        await sandbox.exec(["chown", "-R", owner, scratch], cwd="/", timeout=60.0)
    return offered


async def _whose(sandbox: Sandbox, env: EpisodeEnvironment) -> tuple[str | None, str, str | None]:
    """Who the agent runs as (the environment's agent user: a Harbor task's, the image's USER), its
    scratch folder and that folder's owner ("UID:GID"): root's under /root, another user's under
    /tmp, made by root and given to that user."""
    user = getattr(env, "agent_user", lambda: None)()
    if user is None:
        return None, SCRATCH, None
    found = await sandbox.exec([SHELL, "-c", "id -u; id -g"], cwd="/", timeout=30.0, user=user, cap=200)
    ids = found.output.split()
    if found.exit_code != 0 or len(ids) != 2:
        raise TaskUnavailable(f"the agent's user {user!r} can't run in this container: {_last_line(found.output)}")
    if ids[0] == "0":
        return user, SCRATCH, None
    owner = f"{ids[0]}:{ids[1]}"
    made = await sandbox.exec([SHELL, "-c", f"mkdir -p {USER_SCRATCH}/home {USER_SCRATCH}/tmp && chown -R {owner} "
                                            f"{USER_SCRATCH} && chmod 700 {USER_SCRATCH}"], cwd="/", timeout=30.0)
    if made.exit_code != 0:
        raise TaskUnavailable(f"the agent's scratch folder could not be made: {_last_line(made.output)}")
    return user, USER_SCRATCH, owner


def _moved(path: str, scratch: str) -> str:
    """`path`, given under SCRATCH (a declaration's `keep`), under `scratch`."""
    return scratch + path[len(SCRATCH):] if path == SCRATCH or path.startswith(SCRATCH + "/") else path


def mcp_config(servers: list[ToolServer]) -> dict[str, Any]:
    """The MCP configuration most agents read (Claude Code's `--mcp-config`, Cursor's, ...), with
    each server's URL as the agent's container reaches it."""
    return {"mcpServers": {server.name: {"type": "sse" if server.transport == "sse" else "http",
                                         "url": server.task_url} for server in servers}}


def skills_script(skills: list[Skill], target: str) -> str:
    """A shell script copying each skill's folder into `target` (expanded by the shell: it may name
    $HOME) and printing the folder it copied to."""
    sources = " ".join(shlex.quote(skill.path.rstrip("/")) for skill in skills)
    # double-quoted: its $VARIABLES expand, nothing else does
    quoted = '"' + target.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'
    return f'dir={quoted} && mkdir -p "$dir" && cp -r -- {sources} "$dir"/ && printf %s "$dir"'


def steps(log: list[tuple[list[dict[str, Any]], Answer]]) -> list[Turn]:
    """An installed agent's turns, read from its model calls: each call it made of its tool, with
    what it sent back for it in a later call (its output; calls of its own for other ends, such as a
    summary, may come between); an answer without calls is a turn without an action."""
    turns: list[Turn] = []
    for number, (_, answer) in enumerate(log):
        results: dict[str, str] = {}
        for messages, _ in log[number + 1:]:
            for message in messages:
                if message.get("role") == "tool":  # as the command printed it: with its last line's end
                    text = _content(message)
                    results.setdefault(str(message.get("tool_call_id")), text + ("\n" if text and text[-1] != "\n" else ""))
        for call in answer.tool_calls:
            action = _first_text(call.arguments) or call.arguments
            output = f"{answer.text}\n{call.name}({call.arguments})".strip()
            turns.append(Turn(output, action, results.get(call.id, ""), 0.0, call.id in results))
        if not answer.tool_calls:
            turns.append(Turn(answer.text, None, "", 0.0, False))
    return turns


def shell_container(env: EpisodeEnvironment, who: str) -> tuple[Sandbox, str]:
    """The episode's container and working directory, for `who` (an agent acting in it directly);
    TaskUnavailable for a kind it can't run."""
    sandbox = getattr(env, "sandbox", None)
    if sandbox is None or not supports(env.spec):
        raise TaskUnavailable(f"{who} can't run a {env.kind} task here: it acts in a container's shell, on this "
                              "machine, and is scored by the container's state or its last output (Bash, Harbor, "
                              "your shell environments)")
    return sandbox, str(getattr(env, "workdir", "/"))


def supports(spec: KindSpec) -> bool:
    """Whether an installed agent can run tasks of a kind: a shell in a container, `submit` bare."""
    return spec.tool_argument == "command" and not spec.submit_parameter


async def _kept(sandbox: Sandbox, paths: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for path in paths:
        result = await sandbox.exec(["cat", path], cwd="/", timeout=30.0, cap=KEPT)
        if result.exit_code == 0:
            found[path] = result.output
    return found


def _first_text(arguments: str) -> str:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return ""
    values = parsed.values() if isinstance(parsed, dict) else []
    return next((value for value in values if isinstance(value, str)), "")


def _content(message: dict[str, Any]) -> str:
    """A message's text, as the command printed it: for a command's result that an agent sends as
    a JSON object with an `output` (mini-swe-agent's), that output; for one it sends under a header
    (Codex's exec_command), what follows the header; the notes an agent adds to a result for its
    model (Claude Code 2.x's `<system-reminder>` blocks: the tokens left, ...) left out."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = REMINDER.sub("", str(content or ""))
    if wrapped := EXEC_HEADER.match(text):  # Codex's exec_command result: its header, then the output
        return text[wrapped.end():]
    if text.strip() in NOTHING_PRINTED:  # an agent's words for a command that printed nothing
        return ""
    if text.lstrip().startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            return str(parsed["output"])
    return text


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"
