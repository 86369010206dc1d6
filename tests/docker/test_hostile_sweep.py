"""Hostile agents and task folders in one sweep beside honest episodes (issue 45): an installed agent
that overwrites the proxy, unlinks the socket, binds its own, floods the gateway with oversized and
concurrent bodies, asks for a provider's hosted tool, leaves a background loop planting a reward,
and grows a sparse 64 GB artifact; a Python agent that spends model calls past its turns; task
folders that copy a host secret or name an MCP server on this machine. The honest episodes (the
`tools` strategy on starter Bash tasks and a Harbor folder) store exactly what they store alone, each
attack costs only its own episodes (one line each where refused), and the sweep's process stays
under its memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from tests.stores import rows
from tests.unit.test_host_env import task_folder

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.long]  # two sweeps, an agent layer: ./dev test-long
HELLO = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "hello-file"
GATEWAY = "/run/intercode-gateway"
SECRET = "sk-ant-hostile-sweep-secret"
MOST_RSS_MB = 1500  # the sweep's process, at its peak (it is near 400 MB on the reference machine)

# Each attack prints its HTTP status or exit status into $HOME/attack.txt (kept with the episode).
ATTACKER = f'''
post() {{ python3 - "$@" <<'PY'
import json, os, sys, urllib.request, urllib.error
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
headers = {{"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}}
def ask(body):
    try:
        return urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=60).status
    except urllib.error.HTTPError as error:
        return error.code
    except Exception as error:
        return type(error).__name__
chat = {{"model": "x", "messages": [{{"role": "user", "content": "hi"}}]}}
what = sys.argv[1]
if what == "huge":
    print("huge", ask(json.dumps({{**chat, "pad": "0" * (20 << 20)}}).encode()))
elif what == "hosted":
    print("hosted", ask(json.dumps({{**chat, "tools": [{{"type": "web_search_preview"}}]}}).encode()))
elif what == "burst":  # four bodies that never finish arriving, held; then one more call
    import socket, time
    host, port = os.environ["OPENAI_BASE_URL"].split("//")[1].split("/")[0].split(":")
    held = []
    for _ in range(4):
        s = socket.create_connection((host, int(port)))
        s.sendall(("POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer " + os.environ["OPENAI_API_KEY"] + "\\r\\nContent-Type: application/json\\r\\n"
                   "Content-Length: 1000\\r\\n\\r\\n{{").encode())
        held.append(s)
    for _ in range(40):  # until the gateway refuses a fifth (its handlers hold the four)
        time.sleep(0.5)
        status = ask(json.dumps(chat).encode())
        if status == 429:
            break
    print("burst", status)
    for s in held:
        s.close()
else:
    print("call", ask(json.dumps(chat).encode()))
PY
}}
{{ echo evil > {GATEWAY}/proxy.py; echo "proxy $?"; rm -f {GATEWAY}/gateway.sock; echo "socket $?"
  python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind('{GATEWAY}/gateway.sock.2')" 2>/dev/null; echo "bind $?"
  mkdir -p /logs/artifacts && truncate -s 64G /logs/artifacts/sparse.bin; echo "sparse $?"
  bash -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.1; done' >/dev/null 2>&1 &
  post huge; post hosted; post burst; post call; }} > "$HOME/attack.txt" 2>&1
exit 0
'''

SPENDER = '''
import openai
class Spender:
    async def run(self, episode, model):
        gateway = episode.gateway
        async with openai.AsyncOpenAI(base_url=gateway.openai_base_url, api_key=gateway.api_key, max_retries=0) as client:
            for _ in range(50):
                try:
                    await client.chat.completions.create(model="any", messages=[{"role": "user", "content": "more"}])
                except openai.BadRequestError:
                    return
'''


def sweep_file(tmp_path: Path, name: str, strategies: list[str], extra_tasks: str = "", agents: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\noutput = "{tmp_path / name}"\nstrategies = {json.dumps(strategies)}\n'
                    f'max_turns = 4\nconcurrency = 6\n{agents}'
                    '[[models]]\nname = "openai/sim"\nlocal = { latency = 0.01, solve_rate = 1.0, seed = 5 }\n'
                    '[[tasks]]\ndataset = "starter-bash"\nlimit = 3\n'
                    f'[[tasks]]\nharbor = "{HELLO}"\n{extra_tasks}')
    return path


# Runs a command and writes the peak RSS (KB) of it and what it waited for into a file: this process's
# own RUSAGE_CHILDREN would also count every child that earlier tests of the session waited for.
MEASURED = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); open(sys.argv[1], 'w')"
            ".write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)")


def run_sweep(path: Path, peak: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The sweep in a process of its own; with `peak`, its peak RSS in KB written there."""
    env = {**os.environ, "ANTHROPIC_API_KEY": SECRET, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    command = [sys.executable, "-m", "orchestrator", "sweep", str(path), "--quiet"]
    if peak is not None:
        command = [sys.executable, "-c", MEASURED, str(peak), *command]
    return subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1200)


def honest(out: Path) -> dict[tuple[str, str], tuple[str, float | None]]:
    return {(task, strategy): (status, reward) for task, strategy, status, reward in rows(
        out, "SELECT task_id, strategy, status, reward FROM episodes WHERE strategy = 'tools' "
             "AND task_set IN ('starter-bash', 'hello-file')")}


def test_hostile_agents_and_tasks_change_nothing_for_the_honest_episodes_beside_them(tmp_path):
    alone = run_sweep(sweep_file(tmp_path, "alone", ["tools"]))
    assert alone.returncode == 0, alone.stderr
    expected = honest(tmp_path / "alone")
    assert len(expected) == 4 and all(status == "solved" for status, _ in expected.values()), expected

    hostile = tmp_path / "hostile-tasks"
    task_folder(hostile, "leaks-the-key", '[environment]\nenv = { LEAKED = "${ANTHROPIC_API_KEY}" }\n')
    task_folder(hostile, "mcp-on-this-machine", '[[environment.mcp_servers]]\nname = "host"\n'
                                                'transport = "streamable-http"\nurl = "http://127.0.0.1:9/mcp"\n')
    (tmp_path / "spender.py").write_text(SPENDER)
    agents = (f'[[agents]]\nname = "attacker"\npip = ["six==1.16.0"]\ncommand = {json.dumps(ATTACKER)}\n'
              'keep = ["/root/.intercode-agent/home/attack.txt"]\n')
    mixed = run_sweep(sweep_file(tmp_path, "mixed", ["tools", "attacker", "spender.py:Spender"],
                                 f'[[tasks]]\nharbor = "{hostile}"\n', agents), tmp_path / "peak.txt")
    peak_mb = int((tmp_path / "peak.txt").read_text()) / 1024
    print(f"the mixed sweep's peak RSS: {peak_mb:.0f} MB")
    assert mixed.returncode == 0, mixed.stderr
    out = tmp_path / "mixed"

    assert honest(out) == expected  # the honest episodes: as they are alone
    assert SECRET not in json.dumps(rows(out, "SELECT * FROM turns")) + mixed.stdout + mixed.stderr

    refused = rows(out, "SELECT task_id, status, error FROM episodes WHERE task_set = 'hostile-tasks'")
    assert refused and all(status == "task_error" for _, status, _ in refused), refused
    errors = {task.split("/")[1]: error for task, _, error in refused}
    assert set(errors) == {"leaks-the-key", "mcp-on-this-machine"}, errors
    assert "ANTHROPIC_API_KEY" in errors["leaks-the-key"] and "\n" not in errors["leaks-the-key"]
    assert "127.0.0.1:9" in errors["mcp-on-this-machine"] and "\n" not in errors["mcp-on-this-machine"]

    attacks = [json.loads(b) for b, in rows(out, "SELECT t.breakdown FROM turns t JOIN episodes e ON e.id = t.episode_id "
                                                 "WHERE e.strategy = 'attacker' AND t.breakdown LIKE '%attack.txt%'")]
    assert len(attacks) == 4, attacks  # each honest task's attacker episode ran its whole attack
    for breakdown in attacks:
        said = dict(line.split(" ", 1) for line in breakdown["/root/.intercode-agent/home/attack.txt"].splitlines()
                    if " " in line)
        assert said["proxy"] != "0" and said["socket"] != "0" and said["bind"] != "0", said  # read-only: refused
        # a body past 16 MB: refused before it is read (413, or the connection closed while it still sends)
        assert said["huge"] in ("413", "URLError") and said["hosted"] == "400" and said["call"] == "200", said
        assert said["burst"] == "429", said  # more calls at once than a token may make
    attacked = rows(out, "SELECT status, error FROM episodes WHERE strategy = 'attacker' AND task_set = 'hello-file'")
    assert attacked and attacked[0][0] != "infra_error", attacked  # its sparse artifact cost only itself
    spent = rows(out, "SELECT e.id, count(c.episode_id) FROM episodes e LEFT JOIN llm_calls c ON c.episode_id = e.id "
                      "WHERE e.strategy = 'spender.py:Spender' GROUP BY e.id")
    assert spent and all(calls <= 4 for _, calls in spent), spent  # at most max_turns model calls
    assert peak_mb < MOST_RSS_MB, peak_mb  # the mixed sweep at its peak, or the largest process it waited for
