"""Agents installed in the task's container ([[agents]]), run as a user runs them: mini-swe-agent
(PyPI, fetched on this machine) on the starter Bash tasks and a Harbor folder against the local
scripted server, each of its calls stored with tokens and latency; its containers without a network
and with no key; and one line, nothing lost, for what goes wrong: a package pip can't fetch, an
agent that exits non-zero, floods its output, can't start, or runs out of time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from tests.stores import rows
from tests.processes import ended

pytestmark = pytest.mark.docker
EXAMPLE = PROJECT_ROOT / "examples" / "installed-agent" / "sweep.toml"
HELLO = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "hello-file"
# mini-swe-agent and every package it needs, pinned: the test installs these, whatever the index's newest
PINNED = [line for line in (PROJECT_ROOT / "tests" / "fixtures" / "agents" / "mini-swe-agent.txt").read_text().splitlines()
          if line and not line.startswith("#")]
LOCAL = '[[models]]\nname = "openai/sim"\nlocal = { latency = 0.01, solve_rate = 1.0, seed = 5 }\n'


def probe(tmp_path: Path, command: str, *, timeout: float | None = None, pip: str = '["six==1.16.0"]',
          tasks: str = '[[tasks]]\ndataset = "starter-bash"\nlimit = 2\n', keep: str = "[]") -> Path:
    """A sweep of one small installed agent (`probe`) whose command is `command`."""
    path = tmp_path / "sweep.toml"
    extra = f"timeout = {timeout}\n" if timeout else ""
    path.write_text(f'name = "probe"\noutput = "{tmp_path / "out"}"\nstrategies = ["probe"]\nmax_turns = 4\n'
                    f'[[agents]]\nname = "probe"\npip = {pip}\ncommand = {json.dumps(command)}\nkeep = {keep}\n{extra}'
                    f'{LOCAL}\n{tasks}')
    return path


@pytest.mark.slow
@pytest.mark.long  # its layer and a Python agent's start per episode: ./dev test-long, with the field's other agents
def test_mini_swe_agent_runs_on_starter_bash_and_a_harbor_folder_with_the_local_model(tmp_path, capsys):
    text = EXAMPLE.read_text().replace('output = "../../runs/installed-agent"', f'output = "{tmp_path / "out"}"')
    text = text.replace('strategies = ["tools", "mini-swe-agent"]', 'strategies = ["mini-swe-agent"]')
    assert 'pip = ["mini-swe-agent==2.4.6"]' in text and "mini-swe-agent==2.4.6" in PINNED
    text = text.replace('pip = ["mini-swe-agent==2.4.6"]', f"pip = {json.dumps(PINNED)}")
    # Two starter tasks and a Harbor folder: each episode starts mini-swe-agent, whose imports take seconds of CPU
    text = text.split("[[models]]")[0] + LOCAL + f'[[tasks]]\ndataset = "starter-bash"\nlimit = 2\n[[tasks]]\nharbor = "{HELLO}"\n'
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(text)
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    found = rows(out, "SELECT task_id, status, reward, id FROM episodes")
    assert {task: status for task, status, _, _ in found} == {
        **{f"starter-bash/{n}": "solved" for n in range(2)}, "hello-file/hello-file": "solved"}
    calls = rows(out, "SELECT episode_id, prompt_tokens, completion_tokens, latency_s FROM llm_calls")
    assert {episode for episode, *_ in calls} == {episode for *_, episode in found}
    assert all(prompt > 0 and completion > 0 and latency > 0 for _, prompt, completion, latency in calls)
    assert rows(out, "SELECT count(*) FROM transcripts")[0][0] == 3
    kept = rows(out, "SELECT t.breakdown FROM turns t WHERE t.action LIKE 'mini %'")
    assert kept and all('"exit_status": 0' in b and "trajectory.json" in b for b, in kept)


def test_the_container_has_no_network_and_no_key(tmp_path, capsys):
    command = ('sleep 4; ls /sys/class/net > "$HOME/net.txt"; env > "$HOME/env.txt"; '
               'grep -rlD skip --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev sk-local-offline / > "$HOME/keys.txt" 2>/dev/null; '
               'curl -s "$OPENAI_BASE_URL/models" -H "Authorization: Bearer $OPENAI_API_KEY" > "$HOME/models.txt" '
               '|| python3 -c "import urllib.request,os; print(urllib.request.urlopen(urllib.request.Request('
               'os.environ[\'OPENAI_BASE_URL\'] + \'/models\', headers={\'Authorization\': \'Bearer \' + '
               'os.environ[\'OPENAI_API_KEY\']})).read().decode())" > "$HOME/models.txt"; exit 0')
    keep = json.dumps([f"/root/.intercode-agent/home/{name}.txt" for name in ("net", "env", "keys", "models")])
    sweep = probe(tmp_path, command, keep=keep, tasks='[[tasks]]\ndataset = "starter-bash"\nlimit = 1\n')
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "sweep", str(sweep), "--quiet"], cwd=PROJECT_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    modes: set[str] = set()
    deadline = time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
        ids = subprocess.run(["docker", "ps", "-q", "--filter", "ancestor=intercode/starter-with-probe"],
                             capture_output=True, text=True).stdout.split()
        for container in ids:
            inspected = subprocess.run(["docker", "inspect", "--format", "{{.HostConfig.NetworkMode}}", container],
                                       capture_output=True, text=True).stdout.strip()
            modes |= {inspected} if inspected else set()  # gone since: nothing to say
        time.sleep(0.5)
    _, err = ended(process, 60)
    assert process.returncode == 0, err
    assert modes == {"none"}, modes
    breakdown = json.loads(rows(tmp_path / "out", "SELECT breakdown FROM turns WHERE action LIKE 'sleep 4%'")[0][0])
    files = {Path(k).stem: v for k, v in breakdown.items() if k.startswith("/")}
    assert files["net"].split() == ["lo"]
    assert "sk-local-offline" not in files["env"] and "OPENAI_API_KEY=icgw-" in files["env"]
    assert files["keys"].strip() == ""  # no file of the container holds the model's key
    assert "sim" in files["models"]  # the gateway answered through the socket: the container's one way out


# One model call through the gateway, as an agent's SDK makes it
CALL = ('python3 -c "import urllib.request,os,json; print(urllib.request.urlopen(urllib.request.Request('
        "os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=json.dumps({'model': 'sim', 'messages': "
        "[{'role': 'user', 'content': 'hi'}]}).encode(), headers={'Content-Type': 'application/json', "
        "'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']})).read().decode())\"")
GATEWAY = "/run/intercode-gateway"
ATTACK = (f'{{ echo evil > {GATEWAY}/proxy.py; echo "proxy $?"; rm -f {GATEWAY}/gateway.sock; echo "socket $?"; '
          f'touch {GATEWAY}/planted; echo "plant $?"; python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
          f"s.bind('{GATEWAY}/gateway.sock.2')\" 2>/dev/null; echo \"bind $?\"; }} > \"$HOME/attack.txt\" 2>&1; "
          'python3 -c "import urllib.request,os; print(urllib.request.urlopen(urllib.request.Request('
          "os.environ['OPENAI_BASE_URL'] + '/models', headers={'Authorization': 'Bearer ' + "
          "os.environ['OPENAI_API_KEY']})).read().decode())\" > \"$HOME/models.txt\"; " + CALL + "; exit 0")


def test_an_agent_cannot_change_what_the_next_episodes_of_the_sweep_share(tmp_path, capsys):
    """The gateway's folder is mounted into every container of the sweep: an agent that tries to
    overwrite the proxy, unlink the socket, bind its own or plant a file changes nothing, and each
    episode after it starts its agent and reaches its model as if alone (issue 45)."""
    keep = json.dumps([f"/root/.intercode-agent/home/{name}.txt" for name in ("attack", "models")])
    sweep = probe(tmp_path, ATTACK, keep=keep, tasks='[[tasks]]\ndataset = "starter-bash"\nlimit = 3\n')
    sweep.write_text(sweep.read_text().replace("max_turns = 4", "max_turns = 4\nconcurrency = 1"))
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    found = rows(tmp_path / "out", "SELECT status, error, id FROM episodes ORDER BY id")
    assert len(found) == 3 and all(status == "submitted" and not error for status, error, _ in found), found
    breakdowns = [json.loads(b) for b, in rows(tmp_path / "out", "SELECT breakdown FROM turns WHERE action LIKE '{ echo%'")]
    assert len(breakdowns) == 3
    for breakdown in breakdowns:
        files = {Path(k).stem: v for k, v in breakdown.items() if k.startswith("/")}
        statuses = dict(line.rsplit(" ", 1) for line in files["attack"].splitlines() if line.split(" ")[0] in
                        ("proxy", "socket", "plant", "bind"))
        assert set(statuses) == {"proxy", "socket", "plant", "bind"} and "0" not in statuses.values(), files["attack"]
        assert "sim" in files["models"], files  # its agent started and reached the model through the socket


@pytest.mark.parametrize(("command", "status", "words"), [
    # an agent that never reached its model never ran: its failure, never the model's 0 (issue 46)
    ("echo starting; echo no licence >&2; exit 3", "agent_error",
     "probe: it exited with status 3 before its first model call: no licence"),
    ("echo done; exit 0", "agent_error", "probe: it exited with status 0 before its first model call: done"),
    ("sleep 30", "agent_error", "probe: its time was up before its first model call"),
    ("yes intercode", "agent_error", "probe: the agent printed more than 8 MB and was stopped"),
    ("no-such-agent-command --run", "agent_error", "probe: the agent's command could not start (exit 127)"),
    # one that did reach it is scored, whatever its exit
    (f"{CALL}; exit 3", "submitted", "exit status 3"),
])
def test_what_an_installed_agent_does_wrong_costs_its_episode(tmp_path, capsys, command, status, words):
    timeout = 3.0 if command.startswith("sleep") else 120.0  # the one that sleeps runs out of time; the others end first
    sweep = probe(tmp_path, command, timeout=timeout, tasks='[[tasks]]\ndataset = "starter-bash"\nlimit = 2\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    found = rows(tmp_path / "out", "SELECT status, error, attempts, failure_class FROM episodes")
    assert len(found) == 2 and all(row[0] == status and row[2] == 1 for row in found), found
    assert all((failure == "agent") == (status == "agent_error") for *_, failure in found), found
    error = found[0][1]
    assert error is None or "\n" not in error
    observations = [o for o, in rows(tmp_path / "out", "SELECT observation FROM turns")]
    assert words in (error or "") or any(words in o for o in observations), (error, observations)


def test_a_package_pip_cant_fetch_is_one_line_before_anything_is_claimed(tmp_path, capsys):
    sweep = probe(tmp_path, "true", pip='["no-such-package-for-intercode==1.0"]')
    assert main(["sweep", str(sweep), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: agent 'probe': pip could not download "
                                               "no-such-package-for-intercode==1.0")
    assert not (tmp_path / "out" / "results.db").exists()


CLAUDE_CODE = '''
[[agents]]
name = "claude-code"
npm = ["@anthropic-ai/claude-code@1.0.100"]
command = 'claude -p "$INSTRUCTION" --allowedTools Bash --max-turns "$MAX_TURNS" --model claude-sonnet-4-5'
env = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1", DISABLE_TELEMETRY = "1" }
tool = "Bash"
argument = "command"
'''


@pytest.mark.slow
@pytest.mark.long  # Claude Code's native binary, 200 MB from npm, in a layer: ./dev test-long, with test_field_agents.py
def test_claude_code_from_npm_runs_with_the_local_anthropic_model(tmp_path, capsys):
    """An npm CLI agent: Node.js and the package fetched on this machine, its calls through the
    gateway's Messages API (streaming), its side calls (a title, a summary) among them."""
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "claude"\noutput = "{tmp_path / "out"}"\nstrategies = ["claude-code"]\nmax_turns = 6\n'
                     f'{CLAUDE_CODE}\n[[models]]\nname = "anthropic/sim"\nlocal = {{ latency = 0.01, seed = 4 }}\n'
                     f'[[tasks]]\ndataset = "starter-bash"\nindices = [0, 1]\n[[tasks]]\nharbor = "{HELLO}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    out = tmp_path / "out"
    found = rows(out, "SELECT task_id, status FROM episodes")
    assert sorted(found) == [("hello-file/hello-file", "solved"), ("starter-bash/0", "solved"),
                             ("starter-bash/1", "solved")]
    calls = rows(out, "SELECT prompt_tokens, latency_s FROM llm_calls")
    assert len(calls) >= 6 and all(tokens > 0 for tokens, _ in calls)


# Over the gateway's socket, a token works only from the container it was given to: another
# container (or a process of no container) that learned it is refused, as the kernel tells the
# connecting process (issue 45: any container of the sweep could use any episode's token).
ASK = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect('/gw/gateway.sock'); "
       "s.sendall(('GET /v1/models HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer ' + sys.argv[1] + "
       "'\\r\\nConnection: close\\r\\n\\r\\n').encode()); print(s.recv(64).split()[1].decode())")


async def test_a_token_works_only_from_the_container_it_was_given_to(docker, tmp_path):
    from agents.gateway import LLMGateway
    from agents.models import OracleModel
    from agents.strategies.external import ModelHandle
    from tasks import load_tasks

    folder = tmp_path / "gw"
    folder.mkdir()
    folder.chmod(0o755)
    async with LLMGateway.serve(unix_socket=folder / "gateway.sock") as gateway:
        container = await docker.containers.run({"Image": "intercode/starter", "Cmd": ["sleep", "300"],
                                                 "HostConfig": {"Binds": [f"{folder}:/gw:ro"], "NetworkMode": "none"}})
        try:
            task = load_tasks("starter-bash")[0]
            mine = gateway.open(ModelHandle(OracleModel(), task), container=container.id)
            another = gateway.open(ModelHandle(OracleModel(), task), container="f" * 64)
            unbound = gateway.open(ModelHandle(OracleModel(), task))
            seen = {}
            for name, door in (("mine", mine), ("another", another), ("unbound", unbound)):
                run = await container.exec(["python3", "-c", ASK, door.token])
                async with run.start(detach=False) as stream:
                    output = b""
                    while (message := await stream.read_out()) is not None:
                        output += message.data
                seen[name] = output.decode().strip()
        finally:
            await container.delete(force=True)
    assert seen == {"mine": "200", "another": "401", "unbound": "200"}, seen


def test_an_installed_agent_runs_as_the_image_s_user(tmp_path, capsys):
    """A Harbor task whose Dockerfile says `USER agent` (tests/fixtures/harbor/image-user): the
    installed agent runs as that user, in a scratch folder of its own, and can't write what root
    owns; the verifier, as that user too, scores it 1 (issue 47)."""
    image_user = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "image-user"
    command = ('whoami > /app/who.txt; touch /protected/mine.txt 2>/dev/null && echo writable > /app/protected.txt; '
               f'echo "$HOME" > "$HOME/home.txt"; {CALL}')
    sweep = probe(tmp_path, command, tasks=f'[[tasks]]\nharbor = "{image_user}"\n',
                  keep='["/root/.intercode-agent/home/home.txt"]')
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    [(status, error)] = rows(tmp_path / "out", "SELECT status, error FROM episodes")
    assert (status, error) == ("solved", None)
    [breakdown] = [json.loads(b) for b, in rows(tmp_path / "out", "SELECT breakdown FROM turns WHERE action LIKE 'whoami%'")]
    assert breakdown["/tmp/.intercode-agent/home/home.txt"].strip() == "/tmp/.intercode-agent/home", breakdown
