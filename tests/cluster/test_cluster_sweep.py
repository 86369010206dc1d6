"""Sweeps on a local Ray cluster of three nodes, each with its own Docker engine
(tests/cluster_fixture.py), run as a user runs them: `python -m orchestrator sweep FILE --ray ADDRESS`.

- The oracle over nl2bash fs1-4 and a Spider sample earns a local run's rewards, on every host,
  each episode recording its host and the image's id there.
- A node killed mid-sweep (its Ray processes and its engine): every episode is stored once, the
  lost ones re-run elsewhere as infra retries, no container is left on the surviving engines;
  started again, the node joins the running sweep, gets work, and its orphans are reaped.
- 100 LLM episodes at once across the hosts against a provider that takes 300 requests/min: none
  fails, none is refused, and the achieved rate stays within the limit (the limit is held once, in
  the sweep's process).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environments.bash import volatile
from foundation.pool.ownership import RUN
from foundation.settings import PROJECT_ROOT
from tasks import load_tasks
from tests.cluster_fixture import LocalCluster
from tests.second_engine import image_id
from tests.stores import rows as stored_rows
from tests.processes import ended

# A Ray cluster of three nodes, each with an engine of its own, beside the suite's: ./dev test-long
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.cluster, pytest.mark.long]
pytest.importorskip("ray")

BASH = ["intercode/nl2bash-fs1", "intercode/nl2bash-fs2", "intercode/nl2bash-fs3", "intercode/nl2bash-fs4"]
IMAGES = [*BASH, "intercode/sql", "intercode/sql-starter"]
HOSTS = ["intercode_host_0", "intercode_host_1", "intercode_host_2"]
SWEEP_TIMEOUT = 240.0


def sweep_file(tmp_path: Path, name: str, body: str, **top: object) -> Path:
    head = "".join(f"{key} = {json.dumps(value)}\n" for key, value in
                   {"name": name, "output": str(tmp_path / name), **top}.items())
    path = tmp_path / f"{name}.toml"
    path.write_text(head + body)
    return path


def start_sweep(path: Path, data_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "sweep", str(path), "--data-dir", str(data_dir),
                             "--quiet", "--no-report", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})


def finish(process: subprocess.Popen[str]) -> str:
    _, err = ended(process, SWEEP_TIMEOUT)
    assert process.returncode == 0, err[-3000:]
    return err


def wait_for(process: subprocess.Popen[str], outdir: Path, sql: str, count: int) -> None:
    """Until the running sweep's store has `count` rows of `sql`."""
    deadline = time.monotonic() + SWEEP_TIMEOUT
    while len(rows(outdir, sql)) < count:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"never {count} rows of {sql}"
        time.sleep(0.1)  # between two looks at the store


def rows(outdir: Path, sql: str) -> list[tuple]:
    """The store's rows of `sql`; none while the sweep has not made its store yet."""
    if not (outdir / "results.db").exists():
        return []
    try:
        return stored_rows(outdir, sql)
    except sqlite3.OperationalError:  # its tables not made yet
        return []


def run_labels(outdir: Path) -> list[str]:
    """The labels the sweep's agents gave their containers, from its log."""
    lines = (outdir / "sweep.log").read_text().splitlines()
    return sorted({json.loads(line)["run"] for line in lines if '"cluster_hosts"' in line})


def containers(host: str, label: str | None = None) -> list[str]:
    selector = f"{RUN}={label}" if label else "intercode.managed"
    return subprocess.run(["docker", "-H", host, "ps", "-aq", "--filter", f"label={selector}"],
                          capture_output=True, text=True, check=True).stdout.split()


def assert_no_container(cluster: LocalCluster, outdir: Path) -> None:
    """None of the sweep's runs left a container on any engine; the extra engines (only the
    cluster's) hold none at all. (The main engine is shared with whatever else runs here.)"""
    for label in run_labels(outdir):
        for engine in cluster.engine_hosts[:3]:
            assert containers(engine, label) == [], (engine, label)
    for engine in cluster.engine_hosts[1:3]:
        assert containers(engine) == [], engine


def test_the_oracle_across_three_hosts_earns_a_local_runs_rewards(cluster: LocalCluster, tmp_path: Path,
                                                                   data_dir: Path) -> None:
    # A sample of each set: the cluster's part is placing, shipping and scoring on every host (every
    # gold against its image is the local fidelity tests' part)
    tasks = "".join(f'[[tasks]]\ndataset = "{image.removeprefix("intercode/")}"\nsample = 15\nseed = 7\n' for image in BASH)
    tasks += '[[tasks]]\ndataset = "spider"\nsample = 15\nseed = 7\n'
    body = '[[models]]\nname = "oracle"\n' + tasks
    local = sweep_file(tmp_path, "local", body, strategies=["try_again"], max_turns=3, concurrency=24)
    remote = sweep_file(tmp_path, "remote", body + "[cluster]\nray = \"auto\"\nhost_concurrency = 8\n",
                        strategies=["try_again"], max_turns=3, concurrency=24)
    finish(start_sweep(local, data_dir))
    finish(start_sweep(remote, data_dir, "--ray", cluster.address))  # --ray overrides the file's "auto"
    query = "SELECT task_set, task_id, reward, status FROM episodes ORDER BY task_set, task_id"
    expected = rows(tmp_path / "local", query)
    assert len(expected) == 4 * 15 + 15 and sum(reward for _, _, reward, _ in expected) > 35
    # Some golds give another answer on each run (they read the clock, /proc, or time a failing
    # download): those that differ between two local runs, or read the clock, are left out.
    again = sweep_file(tmp_path, "again", body, strategies=["try_again"], max_turns=3, concurrency=24)
    finish(start_sweep(again, data_dir))
    unstable = {row[1] for row in set(expected) ^ set(rows(tmp_path / "again", query))}
    sampled = {row[1] for row in expected}
    unstable |= {t.id for image in BASH for t in load_tasks(image.removeprefix("intercode/"), data_dir)
                 if t.id in sampled and volatile(t.gold_text)}
    assert len(unstable) < 15, unstable
    local = {row[1]: row for row in expected if row[1] not in unstable}
    remote = {row[1]: row for row in rows(tmp_path / "remote", query) if row[1] not in unstable}
    assert remote.keys() == local.keys()
    differ = sorted(task for task in local if remote[task] != local[task])
    if differ:  # a gold that walks /proc can still differ once: those tasks run again on the cluster
        assert len(differ) <= 2, differ
        by_set: dict[str, list[str]] = {}
        for task in differ:
            by_set.setdefault(task.split("/")[0], []).append(task.split("/")[1])
        sets = "".join(f'[[tasks]]\ndataset = "{name}"\nindices = [{", ".join(indices)}]\n'
                       for name, indices in by_set.items())
        again_remote = sweep_file(tmp_path, "again-remote", '[[models]]\nname = "oracle"\n' + sets +
                                  '[cluster]\nray = "auto"\n', strategies=["try_again"], max_turns=3)
        finish(start_sweep(again_remote, data_dir, "--ray", cluster.address))
        assert [local[row[1]] for row in rows(tmp_path / "again-remote", query)] == rows(tmp_path / "again-remote", query)
    hosts = dict(rows(tmp_path / "remote", "SELECT host, COUNT(*) FROM episodes GROUP BY host"))
    assert sorted(hosts) == HOSTS and min(hosts.values()) >= 5, hosts
    for host, image, digest in rows(tmp_path / "remote", "SELECT DISTINCT host, image, image_digest FROM episodes"):
        engine = cluster.engine_hosts[HOSTS.index(host)]
        assert digest == image_id(engine, image)
    assert rows(tmp_path / "remote", "SELECT MAX(attempts) FROM episodes") == [(1,)]
    for label in run_labels(tmp_path / "remote"):
        for engine in cluster.engine_hosts:
            assert containers(engine, label) == []


def test_a_node_lost_mid_sweep_loses_no_episode_and_its_return_gets_work(cluster: LocalCluster, tmp_path: Path,
                                                                          data_dir: Path) -> None:
    tasks = "".join(f'[[tasks]]\ndataset = "{image.removeprefix("intercode/")}"\n' for image in BASH)
    body = ('[[models]]\nname = "openai/sim-slow"\n[models.local]\nlatency = 1.5\n' + tasks +
            '[cluster]\nray = "auto"\nhost_concurrency = 4\nheartbeat = 0.5\nhost_timeout = 4\n')
    path = sweep_file(tmp_path, "lost", body, strategies=["single"], max_turns=2, concurrency=12, infra_retries=2)
    outdir = tmp_path / "lost"
    process = start_sweep(path, data_dir, "--ray", cluster.address)
    try:
        wait_for(process, outdir, "SELECT 1 FROM episodes WHERE host = 'intercode_host_2'", 4)
        cluster.kill_node(2)
        killed_at = time.time()
        cluster.restart_node(2)
        finish(process)
    finally:
        if process.poll() is None:
            process.kill()
    planned = 200
    keys = rows(outdir, "SELECT task_set, task_id, epoch FROM episodes")
    assert len(keys) == len(set(keys)) == planned
    statuses = dict(rows(outdir, "SELECT status, COUNT(*) FROM episodes GROUP BY status"))
    # The provider answers with the gold: a few golds read the clock or /proc, and differ from run to run.
    assert set(statuses) <= {"solved", "submitted"} and statuses["solved"] >= planned - 5, statuses
    rerun = rows(outdir, "SELECT host, attempts FROM episodes WHERE attempts > 1")
    assert rerun, "the lost host's episodes were re-run"
    log = (outdir / "sweep.log").read_text()
    retries = [json.loads(line) for line in log.splitlines() if '"episode_retry"' in line]
    assert retries and {r["failure_class"] for r in retries} == {"infra"}
    assert {r["host"] for r in retries} == {"intercode_host_2"}
    assert {r["attempt"] for r in retries} == {1}  # each re-run went to a host that served it
    assert '"host_lost"' in log
    came_back = rows(outdir, f"SELECT COUNT(*) FROM episodes WHERE host = 'intercode_host_2' AND started_at > {killed_at}")
    assert came_back[0][0] > 0, "the node that came back got no work"
    joined = [json.loads(line) for line in log.splitlines() if '"host_joined"' in line]
    returned = [event for event in joined if event["host"] == "intercode_host_2"][1:]
    assert returned and returned[0]["reaped"] > 0, joined  # the lost episodes' containers, left on its engine
    assert_no_container(cluster, outdir)  # on the survivors, and on the returned node (its orphans reaped)


def test_a_sweep_killed_with_sigkill_then_resumed_stores_every_episode_once_and_leaves_no_container(
        cluster: LocalCluster, tmp_path: Path, data_dir: Path) -> None:
    body = ('[[models]]\nname = "openai/sim-slow"\n[models.local]\nlatency = 1.5\n'
            '[[tasks]]\ndataset = "nl2bash-fs1"\n[[tasks]]\ndataset = "nl2bash-fs4"\n'
            '[cluster]\nray = "auto"\nhost_concurrency = 8\n')
    path = sweep_file(tmp_path, "killed", body, strategies=["single"], max_turns=2)
    outdir = tmp_path / "killed"
    # Slowly at first (it is killed while it runs), then the resume at full speed.
    process = start_sweep(path, data_dir, "--ray", cluster.address, "--concurrency", "6")
    try:
        wait_for(process, outdir, "SELECT 1 FROM episodes", 3)
        status = subprocess.run([sys.executable, "-m", "orchestrator", "cluster", "status", "--ray", cluster.address],
                                capture_output=True, text=True, timeout=120)
        assert status.returncode == 0, status.stderr
        busy = [line for line in status.stdout.splitlines() if line.startswith("intercode_host_")]
        assert len(busy) == 3 and all(int(line.rsplit(" ", 1)[1]) > 0 for line in busy), status.stdout
        assert status.stdout.count("  sweep agent agent-intercode_host_") == 3, status.stdout
        wait_for(process, outdir, "SELECT 1 FROM episodes", 15)
    finally:
        process.kill()  # SIGKILL: nothing of the sweep cleans up
        process.communicate()
    query = "SELECT task_set, task_id, epoch, status, reward, host, started_at FROM episodes ORDER BY task_id, epoch"
    before = rows(outdir, query)
    assert 15 <= len(before) < 87
    finish(start_sweep(path, data_dir, "--ray", cluster.address, "--concurrency", "24"))
    after = rows(outdir, query)
    assert len(after) == len({row[:3] for row in after}) == 60 + 27  # every planned episode, each once
    assert set(before) <= set(after)  # what the killed run stored stays as it was
    assert {row[3] for row in after} <= {"solved", "submitted"}
    log = (outdir / "sweep.log").read_text().split('"sweep_start"')[-1]  # the resume's part of the log
    joined = [json.loads(line) for line in log.splitlines() if '"host_joined"' in line]
    assert sum(event["reaped"] for event in joined) > 0  # the killed run's containers, reaped by the resume
    assert_no_container(cluster, outdir)


RPM = 300  # the provider's limit: 100 calls take 20 s at it, and far less without it (120 hosts' slots)


def test_100_llm_episodes_across_hosts_keep_the_global_rate_limit(cluster: LocalCluster, tmp_path: Path,
                                                                   data_dir: Path) -> None:
    body = (f'[[models]]\nname = "openai/sim-limited"\n[models.local]\nlatency = 0.05\nrpm = {RPM}\n'
            f'[models.limits]\nrpm = {RPM}\nmax_concurrency = 100\n'
            '[[tasks]]\ndataset = "starter-sql"\n'
            '[cluster]\nray = "auto"\nhost_concurrency = 40\n')
    path = sweep_file(tmp_path, "limits", body, strategies=["single"], max_turns=1, epochs=20, concurrency=100)
    outdir = tmp_path / "limits"
    finish(start_sweep(path, data_dir, "--ray", cluster.address))
    assert rows(outdir, "SELECT status, COUNT(*) FROM episodes GROUP BY status") == [("solved", 100)]
    hosts = dict(rows(outdir, "SELECT host, COUNT(*) FROM episodes GROUP BY host"))
    assert sorted(hosts) == HOSTS, hosts
    calls, attempts = rows(outdir, "SELECT COUNT(*), SUM(attempts) FROM llm_calls")[0]
    assert calls == attempts == 100  # not one request refused by the provider
    first, last = rows(outdir, "SELECT MIN(started_at), MAX(finished_at) FROM episodes")[0]
    rate = (calls - RPM // 60) / (last - first) * 60  # requests per minute beyond the first burst (rpm/60)
    assert rate <= RPM, rate


def test_a_node_without_docker_is_one_line_before_any_episode(cluster: LocalCluster, tmp_path: Path,
                                                              data_dir: Path) -> None:
    body = '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "nl2bash-fs1"\nlimit = 3\n[cluster]\nray = "auto"\n'
    path = sweep_file(tmp_path, "nodocker", body, strategies=["single"])
    number = cluster.add_node("unix:///nonexistent/docker.sock")
    try:
        process = start_sweep(path, data_dir, "--ray", cluster.address)
        _, err = ended(process, SWEEP_TIMEOUT)
    finally:
        cluster.stop_node(number)
    assert process.returncode == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: host intercode_host_{number} cannot run episodes: no Docker engine answers at "
                           "unix:///nonexistent/docker.sock (") and line.endswith("set DOCKER_HOST"), err
    assert rows(tmp_path / "nodocker", "SELECT COUNT(*) FROM episodes") == [(0,)]
    assert_no_container(cluster, tmp_path / "nodocker")


def test_a_sweep_through_ray_client_runs_on_every_host(cluster: LocalCluster, tmp_path: Path, data_dir: Path) -> None:
    """`ray://HOST:PORT`: the head joins through Ray Client (the `ray` extra's `client`); its
    episodes' calls still go straight to each host's channel."""
    body = '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "nl2bash-fs1"\n[cluster]\nray = "auto"\nhost_concurrency = 4\n'
    path = sweep_file(tmp_path, "client", body, strategies=["single"], concurrency=12)
    finish(start_sweep(path, data_dir, "--ray", cluster.client_address))
    stored = rows(tmp_path / "client", "SELECT task_id, status, reward, host FROM episodes")
    assert len(stored) == 60 and {status for _, status, _, _ in stored} <= {"solved", "submitted"}, stored
    assert sum(reward for _, _, reward, _ in stored) >= 55  # fs1's golds, but for the moment-dependent ones
    assert {host for *_, host in stored} == set(HOSTS)
    assert_no_container(cluster, tmp_path / "client")


def test_an_unreachable_cluster_is_one_line_and_keeps_the_results(tmp_path: Path, data_dir: Path) -> None:
    body = ('[[models]]\nname = "openai/sim"\n[models.local]\n[[tasks]]\ndataset = "starter-bash"\nlimit = 4\n'
            '[budget]\ntokens = 1\n')
    path = sweep_file(tmp_path, "kept", body, strategies=["single"], concurrency=1)
    first = start_sweep(path, data_dir)
    _, err = ended(first, SWEEP_TIMEOUT)
    assert first.returncode == 1 and "episodes not started" in err  # the budget stopped it: some left to run
    query = "SELECT task_id, status, reward, host FROM episodes ORDER BY task_id"
    before = rows(tmp_path / "kept", query)
    assert 0 < len(before) < 4
    process = start_sweep(path, data_dir, "--ray", "127.0.0.1:1")
    _, err = ended(process, SWEEP_TIMEOUT)
    assert process.returncode == 2
    assert err.strip().splitlines() == ["error: no Ray cluster at 127.0.0.1:1: Connect call failed ('127.0.0.1', 1)"]
    assert rows(tmp_path / "kept", query) == before


def test_a_cluster_sweep_without_ray_installed_is_one_line(tmp_path: Path, data_dir: Path) -> None:
    body = '[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n[cluster]\nray = "auto"\n'
    path = sweep_file(tmp_path, "noray", body, strategies=["single"])
    script = ("import sys\nsys.modules['ray'] = None  # as if Ray were not installed: its import fails\n"
              "from orchestrator.cli import main\n"
              f"sys.exit(main(['sweep', {str(path)!r}, '--quiet', '--no-report']))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: the sweep's [cluster] needs Ray, an optional extra: pip install -e '.[ray]'"]
    assert not (tmp_path / "noray" / "results.db").exists()  # refused before any store was opened


def test_an_agent_of_yours_runs_on_the_clusters_hosts(cluster: LocalCluster, tmp_path: Path, data_dir: Path) -> None:
    """The agent runs in the sweep's process, as a built-in strategy does; its steps on the hosts."""
    agent = tmp_path / "my_agent.py"
    agent.write_text((PROJECT_ROOT / "examples" / "own-agent" / "my_agent.py").read_text())
    body = ('[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n[[tasks]]\ndataset = "starter-python"\n'
            '[cluster]\nray = "auto"\nhost_concurrency = 4\n')
    path = sweep_file(tmp_path, "agents", body, strategies=["my_agent.py:Terse"], max_turns=4, concurrency=8)
    finish(start_sweep(path, data_dir, "--ray", cluster.address))
    found = rows(tmp_path / "agents", "SELECT status, host FROM episodes")
    assert len(found) == 10 and all(status == "solved" for status, _ in found), found
    assert len({host for _, host in found}) >= 2


def test_a_harbor_task_with_a_service_runs_on_the_clusters_hosts(cluster: LocalCluster, tmp_path: Path,
                                                                 data_dir: Path) -> None:
    """A task whose service runs beside the agent's container: its image is shipped with the
    task's, and each host leases the group from its own pool; nothing is left on any engine."""
    harbor = PROJECT_ROOT / "tests" / "fixtures" / "harbor"
    body = (f'[[models]]\nname = "oracle"\n[[tasks]]\nharbor = "{harbor / "service-api"}"\n'
            f'[[tasks]]\nharbor = "{harbor / "multi-step"}"\n[cluster]\nray = "auto"\nhost_concurrency = 2\n')
    path = sweep_file(tmp_path, "services", body, strategies=["try_again", "tools"], max_turns=6, epochs=3,
                      concurrency=6)
    finish(start_sweep(path, data_dir, "--ray", cluster.address))
    found = rows(tmp_path / "services", "SELECT task_id, status, host, error FROM episodes")
    assert len(found) == 12 and all(status == "solved" for _, status, _, _ in found), [f for f in found if f[1] != "solved"]
    assert len({host for task, _, host, _ in found if task.endswith("service-api")}) >= 2
    assert_no_container(cluster, tmp_path / "services")
    for engine in cluster.engine_hosts[:3]:
        networks = subprocess.run(["docker", "-H", engine, "network", "ls", "-q", "--filter", "label=intercode.managed"],
                                  capture_output=True, text=True, check=True).stdout.split()
        assert networks == [] or engine == cluster.engine_hosts[0], (engine, networks)
