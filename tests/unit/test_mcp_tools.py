"""A task's MCP servers as tools: agents/mcp_tools.py against a real MCP server (the mcp package's
MCPServer over streamable HTTP, served by uvicorn on 127.0.0.1 in this process), and the `tools`
strategy offering and calling them with a model behind the scripted LLM server, through litellm.
No mocks: real HTTP both ways. Also what an installed agent is handed: the MCP configuration and
the script that copies the skills."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from agents.base import get_strategy
from agents.llm import LLMClient, ModelSpec, RetryPolicy
from agents.llm.server import Rule, ScriptedLLMServer, ScriptedToolCall, ServerConfig
from agents.llm.transport import InProcessTransport
from agents import mcp_tools
from agents.mcp_tools import McpTools, ToolServerError
from agents.models import LLMModel
from agents.episode import play
from agents.strategies.installed import mcp_config, skills_script
from environments.base import Environment, Skill, ToolServer
from environments.kind import KindSpec, register
from foundation.concurrency import TaskOwner
from tasks import Task
from tests.lazy import lazy

mcp_types = lazy("mcp.types")

KEY = "sk-test-mcp-7d2e"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()  # 24 bytes


def demo_server() -> MCPServer:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("demo", log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, saying why."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    def look() -> list[mcp_types.ContentBlock]:
        """A caption and a picture."""
        return [mcp_types.TextContent(text="a picture:"), mcp_types.ImageContent(data=PNG, mime_type="image/png")]

    @server.tool()
    async def slow() -> str:
        """Answers after two seconds."""
        await asyncio.sleep(2)
        return "late"

    @server.tool(name="odd.name")
    def odd_dot() -> str:
        return "dot"

    @server.tool(name="odd_name")
    def odd_underscore() -> str:
        return "underscore"

    @server.tool(name="x" * 80)
    def long_name() -> str:
        return "long"

    return server


class Served:
    """An MCP server served over streamable HTTP on a free port of 127.0.0.1, in a task of `owner`."""

    def __init__(self, server: MCPServer, owner: TaskOwner, app: Any = None) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}/mcp"
        config = uvicorn.Config(app or server.streamable_http_app(), log_config=None, log_level="warning",
                                lifespan="on", timeout_graceful_shutdown=1)
        self.web = uvicorn.Server(config)
        self.task = owner.start(self.web.serve(sockets=[self.socket]), name="uvicorn")

    async def started(self) -> None:
        while not self.web.started:
            assert not self.task.done(), self.task.exception()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.web.should_exit = True
        await self.task
        self.socket.close()


@asynccontextmanager
async def serving(server: MCPServer, app: Any = None) -> AsyncIterator[Served]:
    """`server` (or `app`, its ASGI app changed) served for the block, then stopped (if the block
    has not stopped it)."""
    async with TaskOwner("mcp server") as owner:
        served = Served(server, owner, app)
        try:
            await served.started()
            yield served
        finally:
            await served.stop()


def free_url() -> str:
    """A URL where nothing listens (a port just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def local(name: str, url: str) -> ToolServer:
    return ToolServer(name, "streamable-http", url, f"http://{name}:8000/mcp")


async def test_a_servers_tools_are_listed_and_called() -> None:
    async with serving(demo_server()) as served, McpTools([local("demo", served.url)], timeout=5) as tools:
        names = [schema["function"]["name"] for schema in tools.schemas]
        assert names[:4] == ["demo__add", "demo__fail", "demo__look", "demo__slow"]
        add = tools.schemas[0]["function"]
        assert add["parameters"]["type"] == "object" and add["parameters"]["required"] == ["a", "b"]
        assert add["description"].startswith("Add two whole numbers.") and "demo" in add["description"]
        assert await tools.call("demo__add", {"a": 2, "b": 3}) == "5"
        assert await tools.call("demo__look", {}) == "a picture:\n[image: image/png, 24 bytes, not shown]"
        assert tools.action("demo__add", {"a": 2, "b": 3}) == 'mcp:demo.add {"a": 2, "b": 3}'


async def test_a_server_over_sse_too() -> None:
    server = demo_server()
    async with serving(server, server.sse_app()) as served:
        url = served.url.removesuffix("/mcp") + "/sse"
        async with McpTools([ToolServer("old", "sse", url, "http://old/sse")], timeout=5) as tools:
            assert [schema["function"]["name"] for schema in tools.schemas][:2] == ["old__add", "old__fail"]
            assert await tools.call("old__add", {"a": 20, "b": 22}) == "42"


async def test_offered_names_are_sanitized_cut_and_unique() -> None:
    async with serving(demo_server()) as served, McpTools([local("my server.v2", served.url)], timeout=5) as tools:
        names = [schema["function"]["name"] for schema in tools.schemas]
        assert names[4:] == ["my_server_v2__odd_name", "my_server_v2__odd_name_2", ("my_server_v2__" + "x" * 80)[:64]]
        assert all(len(name) <= 64 for name in names) and len(set(names)) == len(names)
        assert await tools.call("my_server_v2__odd_name", {}) == "dot"
        assert await tools.call("my_server_v2__odd_name_2", {}) == "underscore"
        assert tools.action("my_server_v2__odd_name", {}) == "mcp:my server.v2.odd.name {}"


async def test_an_error_result_is_text_not_an_exception() -> None:
    async with serving(demo_server()) as served, McpTools([local("demo", served.url)], timeout=5) as tools:
        failed = await tools.call("demo__fail", {"reason": "no cats"})
        wrong = await tools.call("demo__add", {"a": "two"})
        assert failed.startswith("Error: the tool reported a failure:") and "refused: no cats" in failed
        assert wrong.startswith("Error: the tool reported a failure:") and "validation error" in wrong
        assert await tools.call("demo__add", {"a": 1, "b": 1}) == "2"  # the session goes on


async def test_a_server_where_nothing_listens_is_one_line_within_its_deadline() -> None:
    url = free_url()
    started = time.monotonic()
    with pytest.raises(ToolServerError) as raised:
        async with McpTools([local("search", url)], timeout=5):
            pass
    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "\n" not in message and "'search'" in message and url in message and "can't be reached" in message


async def test_a_server_that_does_not_answer_fails_at_its_deadline() -> None:
    with socket.socket() as hole:  # it accepts connections (the kernel does) and never answers
        hole.bind(("127.0.0.1", 0))
        hole.listen(8)
        url = f"http://127.0.0.1:{hole.getsockname()[1]}/mcp"
        started = time.monotonic()
        with pytest.raises(ToolServerError, match=r"^the task's MCP server 'mute' at \S+ did not answer within 1 s$"):
            async with McpTools([local("mute", url)], timeout=1):
                pass
        assert 1 <= time.monotonic() - started < 4


async def test_a_late_answer_and_a_server_gone_mid_episode_are_errors_of_the_call() -> None:
    async with serving(demo_server()) as served, McpTools([local("demo", served.url)], timeout=5,
                                                         call_timeout=0.5) as tools:
        started = time.monotonic()
        with pytest.raises(ToolServerError, match="did not answer a call of slow within 0.5 s"):
            await tools.call("demo__slow", {})
        assert time.monotonic() - started < 1.5
        assert await tools.call("demo__add", {"a": 1, "b": 2}) == "3"
        await served.stop()  # the server goes away while the session holds it
        with pytest.raises(ToolServerError, match=r"'demo' at \S+ failed during a call of add: ConnectError"):
            await tools.call("demo__add", {"a": 1, "b": 2})
        await asyncio.sleep(0.1)  # this task was not cancelled by the client's tasks meanwhile


async def test_leaving_does_not_wait_on_a_server_that_does_not_end_its_session(monkeypatch: pytest.MonkeyPatch) -> None:
    server = demo_server()
    app = server.streamable_http_app()

    async def deaf_to_delete(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            await asyncio.sleep(30)  # until the server stops
        await app(scope, receive, send)

    monkeypatch.setattr(mcp_tools, "LEAVE_TIMEOUT", 0.5)
    async with serving(server, deaf_to_delete) as served:
        async with McpTools([local("demo", served.url)], timeout=5) as tools:
            assert await tools.call("demo__add", {"a": 1, "b": 1}) == "2"
            started = time.monotonic()
        assert time.monotonic() - started < 2


# ------------------------------------------------------------------ the tools strategy


class McpToyEnv(Environment):
    """A shell-like kind without a container, scored at the end (as Harbor's), whose task offers
    the MCP server its meta names: `submit` scores 1 once the history holds an MCP call that
    answered 5."""

    kind = "mcp-toy"
    scores_every_action = False

    async def _start(self, task: Task) -> None:
        self.url = str(task.meta["mcp_url"])

    async def _execute(self, action: str) -> tuple[str, bool]:
        return f"ran: {action}", True

    async def _reward(self, argument: str) -> tuple[float, dict[str, Any]]:
        return float(any(a.startswith("mcp:demo.add ") and o == "5" for a, o in self.history)), {}

    async def _stop(self) -> None:
        pass

    def tool_servers(self) -> list[ToolServer]:
        return [local("demo", self.url)]


register(KindSpec(name="mcp-toy", environment=McpToyEnv, language="BASH", setting="toy shell", fence="bash",
                  fence_tags=frozenset({"bash"}), export_name="ic_mcp_toy", datasets=(), tool="bash",
                  tool_argument="command", submit_at_end=True, shows_reward=False, prompts="task"))


def toy_task(url: str) -> Task:
    return Task(kind="mcp-toy", dataset="mcp-toy", index=0, query="Add 2 and 3 with the demo server.", gold="",
                image="", meta={"mcp_url": url}, offers_extras=True)


def call(name: str, arguments: dict[str, Any]) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=json.dumps(arguments))


async def test_the_tools_strategy_calls_a_tasks_mcp_tool_as_a_turn() -> None:
    # first the MCP tool, then (its result, 5, is the last message) a look around and submit
    script = ServerConfig(default_answer="Let me add.", default_tool_calls=[call("demo__add", {"a": 2, "b": 3})],
                          rules=[Rule(pattern=r"^5$", answer="It is 5.",
                                      tool_calls=[call("bash", {"command": "ls"}), call("submit", {})])])
    async with serving(demo_server()) as served, ScriptedLLMServer(script) as llm:
        model = "openai/gpt-scripted"
        spec = ModelSpec(name=model, api_base=f"{llm.base_url}/v1", api_key=KEY, timeout=10)
        client = LLMClient([spec], retry=RetryPolicy(max_attempts=1), transport=InProcessTransport())
        env = McpToyEnv(None)  # type: ignore[arg-type]  # no runtime: nothing runs in a container
        async with env:
            outcome = await play(get_strategy("tools"), env, toy_task(served.url), LLMModel(client, model), max_turns=4)
            history = list(env.history)
    mcp, ls, submit = outcome.turns
    assert (mcp.action, mcp.observation, mcp.executed, mcp.reward) == ('mcp:demo.add {"a": 2, "b": 3}', "5", True, 0.0)
    assert mcp.output == 'Let me add.\ndemo__add({"a": 2, "b": 3})'
    assert (ls.action, submit.action, submit.reward) == ("ls", "submit", 1.0) and outcome.status == "solved"
    assert history[0] == ('mcp:demo.add {"a": 2, "b": 3}', "5")  # noted: Harbor's trajectory shows it
    first, second = ((r.body or {}) for r in llm.requests)
    offered = [tool["function"]["name"] for tool in first["tools"]]
    assert offered[:3] == ["bash", "submit", "demo__add"] and "demo__slow" in offered
    assert "tools of its own" in first["messages"][0]["content"]
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["content"] == "5"
    assert result["tool_call_id"] == second["messages"][-2]["tool_calls"][0]["id"]


async def test_a_tasks_mcp_server_that_cannot_be_reached_fails_the_episode_as_the_tasks() -> None:
    url = free_url()
    script = ServerConfig(default_tool_calls=[call("submit", {})])
    async with ScriptedLLMServer(script) as llm:
        model = "openai/gpt-scripted"
        spec = ModelSpec(name=model, api_base=f"{llm.base_url}/v1", api_key=KEY, timeout=10)
        client = LLMClient([spec], retry=RetryPolicy(max_attempts=1), transport=InProcessTransport())
        async with McpToyEnv(None) as env:  # type: ignore[arg-type]
            with pytest.raises(ToolServerError, match=f"'demo' at {url} can't be reached"):
                await play(get_strategy("tools"), env, toy_task(url), LLMModel(client, model), max_turns=2)
        assert llm.requests == []  # the model was never asked


# ------------------------------------------------------------------ an installed agent's hand-over


def test_an_installed_agents_mcp_configuration_is_the_common_form() -> None:
    servers = [local("search", "http://10.0.0.2:8000/mcp"),
               ToolServer("files", "sse", "http://10.0.0.3/sse", "http://files/sse")]
    assert mcp_config(servers) == {"mcpServers": {"search": {"type": "http", "url": "http://search:8000/mcp"},
                                                  "files": {"type": "sse", "url": "http://files/sse"}}}


async def test_the_skills_are_copied_to_the_agents_folder(tmp_path: Path) -> None:
    for name in ("pdf", "git log"):
        (tmp_path / "skills" / name).mkdir(parents=True)
        (tmp_path / "skills" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: d\n---\n")
    skills = [Skill("pdf", "d", f"{tmp_path}/skills/pdf/"), Skill("git", "d", f"{tmp_path}/skills/git log")]
    script = skills_script(skills, "$HOME/agent skills")
    process = await asyncio.create_subprocess_exec("bash", "-c", script, stdout=asyncio.subprocess.PIPE,
                                                   env={**os.environ, "HOME": str(tmp_path / "home")})
    output, _ = await process.communicate()
    assert process.returncode == 0 and output.decode() == f"{tmp_path}/home/agent skills"
    copied = sorted(p.relative_to(tmp_path / "home").as_posix() for p in (tmp_path / "home").rglob("SKILL.md"))
    assert copied == ["agent skills/git log/SKILL.md", "agent skills/pdf/SKILL.md"]


def test_a_tools_result_is_kept_to_its_limit():
    """A task's MCP server is a stranger's code: its result is kept as an action's output is, cut
    at RESULT_LIMIT with what was left out said (issue 45: results were stored whole)."""
    from agents.mcp_tools import RESULT_LIMIT, rendered

    huge = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x" * (RESULT_LIMIT + 1000))])
    text = rendered(huge)
    assert text.startswith("x" * 100) and text.endswith("[result truncated: 1000 characters omitted]")
    assert len(text) < RESULT_LIMIT + 100
    small = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="fine")])
    assert rendered(small) == "fine"
