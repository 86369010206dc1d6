"""A provider that echoes the API key: the key is found nowhere the project writes or shows.

The scripted server plays the provider (over real HTTP, through litellm in the sweep's worker
processes) and puts the key it was sent into everything it returns: the model name and a response
header as `Bearer <key>`, the key alone after the text and in each tool call's arguments. A real
sweep over it (an OpenAI-format and an Anthropic-format model, each with a key from the variable its
`api_key_env` names; a strategy that answers in text and one that calls tools), then `report`,
`export` and the viewer: the key, bare or as a Bearer, is in no row of the store, no log line, no
report, no exported file and no page. The echo itself is checked too: the redaction marker stands
where the key would have been.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sqlite3
import threading
import zipfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import aiohttp
import pytest

from agents.llm.server import ScriptedLLMServer, ScriptedToolCall, ServerConfig
from orchestrator.cli import main
from orchestrator.view.app import serving
from orchestrator.view.source import Source
from tests.stores import rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Not shaped like an sk- key: only what the project knows of its keys can redact them.
KEYS = {"INTERCODE_TEST_ECHO_OPENAI": "echo-openai-SECRET-3f9d1c", "INTERCODE_TEST_ECHO_ANTHROPIC": "echo-ant-SECRET-7b2e40"}
DEADLINE = 60.0  # seconds for the server's start and stop, and for every page


@contextmanager
def provider(config: ServerConfig) -> Iterator[ScriptedLLMServer]:
    """The scripted provider on an event loop of its own, in a thread: the commands run theirs."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="echoing-provider", daemon=True)
    thread.start()
    server = ScriptedLLMServer(config)
    try:
        asyncio.run_coroutine_threadsafe(server.__aenter__(), loop).result(DEADLINE)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(server.__aexit__(None, None, None), loop).result(DEADLINE)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(DEADLINE)
        loop.close()


def sweep_file(root: Path, base_url: str) -> Path:
    (openai_var, anthropic_var) = KEYS
    path = root / "echo.toml"
    path.write_text(f"""name = "echoed-key"
output = "{root / 'out'}"
strategies = ["single", "tools"]
max_turns = 2
concurrency = 8
[[models]]
name = "openai/echo-provider"
api_base = "{base_url}/v1"
api_key_env = "{openai_var}"
[[models]]
name = "anthropic/echo-provider"
api_base = "{base_url}"
api_key_env = "{anthropic_var}"
[[tasks]]
dataset = "starter-bash"
""")
    return path


async def pages(outdir: Path) -> dict[str, str]:
    """The viewer's overview, its episode list and every episode's page, by path."""
    episode_ids = [i for (i,) in rows(outdir, "SELECT id FROM episodes ORDER BY id")]
    paths = ["/s/0", "/s/0/episodes", *(f"/s/0/episodes/{i}" for i in episode_ids)]
    timeout = aiohttp.ClientTimeout(total=DEADLINE)
    async with serving([Source.open(0, outdir)], "127.0.0.1", 0) as base, \
            aiohttp.ClientSession(base, timeout=timeout) as client:
        found = {}
        for path in paths:
            async with client.get(path) as response:
                assert response.status == 200, path
                found[path] = await response.text()
    return found


def store_dump(outdir: Path) -> str:
    """Every row of every table of the store, every column, as SQL text."""
    with closing(sqlite3.connect(outdir / "results.db")) as db:
        return "\n".join(db.iterdump())


def file_texts(root: Path) -> dict[str, str]:
    """Every file under `root` as text (the store's raw bytes too), and every member of each zip
    (Inspect's .eval logs are compressed zips), by path."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        found[str(path)] = path.read_bytes().decode(errors="replace")
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    found[f"{path}!{member}"] = archive.read(member).decode(errors="replace")
    return found


def test_a_key_the_provider_echoes_is_found_nowhere(tmp_path, monkeypatch, capsys):
    for variable, key in KEYS.items():
        monkeypatch.setenv(variable, key)
    config = ServerConfig(echo_key=True, default_answer="ls /",
                          default_tool_calls=[ScriptedToolCall(name="bash", arguments='{"command": "ls /"}')])
    with provider(config) as server:
        assert main(["sweep", str(sweep_file(tmp_path, server.base_url)), "--quiet"]) == 0
    out = tmp_path / "out"
    assert {r.api_key for r in server.requests} == set(KEYS.values())  # the provider was sent both keys...
    assert main(["report", str(out)]) == 0
    assert main(["export", str(out), "--format", "intercode", "--to", str(tmp_path / "intercode")]) == 0
    inspect = importlib.util.find_spec("inspect_ai") is not None  # the optional extra; the test venv has it
    if inspect:
        assert main(["export", str(out), "--format", "inspect", "--to", str(tmp_path / "inspect")]) == 0
    shown = asyncio.run(pages(out))
    printed = capsys.readouterr()

    # ...and echoed it: the marker stands where it would have been (so this test can fail).
    assert rows(out, "SELECT count(*), count(DISTINCT strategy) FROM episodes") == [(20, 2)]
    assert set(rows(out, "SELECT DISTINCT served_model FROM llm_calls")) == {("Bearer ***",), ("***",)}
    assert set(rows(out, "SELECT DISTINCT served_model FROM episodes")) == {("Bearer ***",), ("***",)}
    assert rows(out, "SELECT count(*) FROM turns WHERE output NOT LIKE '%***%'") == [(0,)]
    assert rows(out, """SELECT count(*) FROM turns WHERE output LIKE '%"api_key": "***"%'""")[0][0] > 0
    places = {"results.db (every table)": store_dump(out), "stdout": printed.out, "stderr": printed.err,
              **file_texts(tmp_path), **{f"viewer {path}": page for path, page in shown.items()}}
    assert {"report.md", "report.html", "sweep.log"} <= {Path(p).name for p in places}
    assert any(p.endswith(".json") for p in places if "/intercode/" in p)
    assert not inspect or any(p.endswith(".eval") for p in places if "/inspect/" in p)
    assert "Bearer ***" in places[str(out / "report.md")] and any("Bearer ***" in page for page in shown.values())
    leaks = sorted(place for place, text in places.items() for key in KEYS.values()
                   if key in text or f"Bearer {key}" in text)
    assert leaks == []
