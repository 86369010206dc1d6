"""The field's installed agents by name, as Harbor's `-a NAME`: `strategies = ["claude-code"]` runs
Claude Code with no `[[agents]]` table, at the version pinned here (the one the tests run);
`[[agents]] name = "claude-code" version = "2.1.400"` runs another, the rest of its declaration as
here; any field the table gives is its own.

    declaration("codex")                  # the fields of an [[agents]] table: pip, npm, command, ...
    declaration("codex", "0.172.0")       # another version

What each runs, and why (read from each agent's own docs and Harbor's installed agents):

- mini-swe-agent (PyPI): its `mini` CLI, whose one tool is bash; OpenAI's chat completions.
- claude-code (npm): Claude Code 2.x ships a native binary in a package per platform
  (`@anthropic-ai/claude-code-linux-x64`), which its install script copies over a stub; install
  scripts never run here, so the command runs that binary itself. Anthropic's Messages API; its
  shell tool is `Bash`; as root it wants IS_SANDBOX=1 to skip its permission prompts.
- codex (npm): Codex CLI's native binary comes in its optional package (`@openai/codex-linux-x64`);
  it speaks only OpenAI's Responses API now, configured as a provider of its own in
  $CODEX_HOME/config.toml; its shell tool is `exec_command` (argument `cmd`), whose results it
  wraps (a header, then `Output:`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnownAgent:
    name: str
    version: str  # the version pinned and tested here
    pip: tuple[str, ...] = ()  # "{version}" is this agent's version
    npm: tuple[str, ...] = ()
    command: str = ""
    env: dict[str, str] = field(default_factory=dict)
    tool: str = "bash"
    argument: str = "command"
    finish: str = ""
    keep: tuple[str, ...] = ()
    skills_dir: str = ""

    def declaration(self, version: str | None = None) -> dict[str, Any]:
        """The fields of an [[agents]] table that runs this agent at `version` (default: the pinned)."""
        chosen = version or self.version
        return {"name": self.name, "version": chosen,
                "pip": [p.format(version=chosen) for p in self.pip], "npm": [n.format(version=chosen) for n in self.npm],
                "command": self.command, "env": dict(self.env), "tool": self.tool, "argument": self.argument,
                "finish": self.finish, "keep": list(self.keep), "skills_dir": self.skills_dir}


HOME = "/usr/lib/intercode/agents"  # where an installed agent's files are (agents/strategies/installed.py)
SCRATCH_HOME = "/root/.intercode-agent/home"  # its $HOME

MINI_SWE_AGENT = KnownAgent(
    "mini-swe-agent", "2.4.6", pip=("mini-swe-agent=={version}",),
    command=('mini --yolo --exit-immediately --model openai/intercode --task "$INSTRUCTION" --cost-limit 0 '
             '-c mini.yaml -c agent.step_limit=$MAX_TURNS --output "$HOME/trajectory.json"'),
    env={"MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors", "MSWEA_SILENT_STARTUP": "1"},
    finish="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", keep=(f"{SCRATCH_HOME}/trajectory.json",))

CLAUDE_CODE = KnownAgent(
    "claude-code", "2.1.332", npm=("@anthropic-ai/claude-code@{version}",),
    # the native binary where 2.x ships it (before 2.1.113, `claude` itself is the CLI, on Node.js)
    command=(f'native={HOME}/claude-code/npm/node_modules/@anthropic-ai/claude-code-linux-x64; '
             '[ -x "$native/claude" ] && export PATH="$native:$PATH"; '
             'claude --print --verbose --output-format=stream-json --permission-mode=bypassPermissions '
             '--max-turns "$MAX_TURNS" --model claude-sonnet-4-5 '
             '${INTERCODE_MCP_CONFIG:+--mcp-config "$INTERCODE_MCP_CONFIG"} -- "$INSTRUCTION"'),
    env={"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
         "DISABLE_TELEMETRY": "1"},  # its configuration in $HOME/.claude, the agent's own $HOME
    tool="Bash", argument="command", skills_dir="$HOME/.claude/skills")

CODEX = KnownAgent(
    "codex", "0.171.0", npm=("@openai/codex@{version}",),
    # the gateway as a provider of its own, over the Responses API (Codex speaks no other)
    command=('export CODEX_HOME="$HOME/.codex" && mkdir -p "$CODEX_HOME" && printf \'model_provider = "intercode"\\n'
             '[model_providers.intercode]\\nname = "intercode"\\nbase_url = "%s"\\nenv_key = "OPENAI_API_KEY"\\n'
             'wire_api = "responses"\\n\' "$OPENAI_BASE_URL" > "$CODEX_HOME/config.toml" && '
             'codex exec --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model gpt-5.5 '
             '-- "$INSTRUCTION"'),
    env={"RUST_LOG": "error"},
    tool="exec_command", argument="cmd", skills_dir="$HOME/.codex/skills")

KNOWN: dict[str, KnownAgent] = {agent.name: agent for agent in (MINI_SWE_AGENT, CLAUDE_CODE, CODEX)}


def declaration(name: str, version: str | None = None) -> dict[str, Any]:
    """The [[agents]] fields of the known agent `name` at `version` (KeyError for an unknown name)."""
    return KNOWN[name].declaration(version)
