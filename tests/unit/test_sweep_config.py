"""The sweep file's validation and the sweep's fair order: no engine needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation.errors import ConfigError
from orchestrator.cli import main
from orchestrator.store import EpisodeKey
from orchestrator.sweep.config import SweepConfig, load_sweep
from orchestrator.sweep.fair_queue import FairQueue
from orchestrator.sweep.plan import PlannedEpisode, plan
from orchestrator.tasksets.config import TaskSetConfig
from orchestrator.tasksets.resolve import resolve
from tasks import load_tasks

GOOD = """
name = "t"
output = "OUT"
strategies = ["single", "try_again"]
[[models]]
name = "oracle"
[[models]]
name = "openai/sim"
local = { latency = 0 }
[[tasks]]
dataset = "starter-bash"
[[tasks]]
dataset = "starter-sql"
limit = 2
"""


def select_tasks(spec: TaskSetConfig, data_dir: Path | None) -> list:
    """The tasks of one task set as the sweep resolves it: filtered, then sampled (seeded) or cut."""
    return resolve(spec, base_dir=Path.cwd(), data_dir=data_dir).tasks


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text.replace("OUT", str(tmp_path / "out")))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_sweep(write(tmp_path, text))
    return str(caught.value)


def test_a_good_file_loads_with_defaults_and_a_stable_identity(tmp_path):
    config, digest = load_sweep(write(tmp_path, GOOD))
    assert (config.epochs, config.max_turns, config.reward_mode) == (1, 10, "original")
    assert len(digest) == 64
    again, _ = load_sweep(write(tmp_path, "concurrency = 99\n" + GOOD.replace('latency = 0', 'latency = 3')))
    assert again.identity() == config.identity()  # speed settings don't change the episodes
    other, _ = load_sweep(write(tmp_path, GOOD.replace("limit = 2", "limit = 3")))
    assert other.identity() != config.identity()


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: "colour = 1\n" + t, "colour: unknown key; allowed: name, output, models"),
    (lambda t: t.replace('name = "oracle"', 'name = "oracle"\ntemp = 1'), "models.0.temp: unknown key; allowed: name, api_base"),
    (lambda t: t.replace('"starter-sql"', '"spiderr"'), "tasks.1.dataset: unknown dataset 'spiderr'; allowed: nl2bash-fs1"),
    (lambda t: t.replace('"try_again"', '"tryagain"'), "strategies: unknown strategy 'tryagain'; allowed: single, try_again"),
    (lambda t: t.replace("limit = 2", "limit = 0"), "tasks.1.limit: Input should be greater than or equal to 1"),
    (lambda t: t.replace('name = "t"\n', ""), "name: required key is missing"),
    (lambda t: t.replace('name = "openai/sim"', 'name = "sim"'), "a local model is served over the OpenAI or the Anthropic API"),
    (lambda t: t + '\n[[tasks]]\ndataset = "starter-bash"\n', "task set 'starter-bash' is listed twice"),
    (lambda t: t.replace("[[tasks]]", "[[tasks]", 1), "is not valid TOML"),
    (lambda t: t + '[cluster]\nray = "head"\n', 'cluster.ray: expected "auto", "HOST:PORT" or "ray://HOST:PORT", not \'head\''),
    (lambda t: t + '[cluster]\nray = "auto"\nhosts = 3\n', "cluster.hosts: Input should be a valid list"),
    (lambda t: t + '[cluster]\nray = "auto"\nwarm = 3\n', "cluster.warm: unknown key; allowed: ray, hosts, host_concurrency"),
])
def test_each_mistake_is_one_line_naming_the_key(tmp_path, change, expected):
    message = error_of(tmp_path, change(GOOD))
    assert expected in message
    assert "\n" not in message


def test_the_cluster_section_and_ray_flag_do_not_change_the_identity(tmp_path):
    config, _ = load_sweep(write(tmp_path, GOOD))
    assert config.cluster is None
    flagged, _ = load_sweep(write(tmp_path, GOOD), {"ray": "10.0.0.5:6379"})
    assert flagged.cluster is not None and flagged.cluster.ray == "10.0.0.5:6379"
    assert (flagged.cluster.heartbeat, flagged.cluster.host_timeout, flagged.cluster.ship_images) == (2.0, 15.0, True)
    filed, _ = load_sweep(write(tmp_path, GOOD + '[cluster]\nray = "auto"\nhost_concurrency = 4\n'), {"ray": "ray://h:10001"})
    assert (filed.cluster.ray, filed.cluster.host_concurrency) == ("ray://h:10001", 4)  # the flag overrides the address only
    assert config.identity() == flagged.identity() == filed.identity()  # where episodes run does not change them


def test_a_missing_file_and_a_bad_file_exit_2_with_one_line(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "nope.toml")]) == 2
    assert main(["sweep", str(write(tmp_path, "epochs = 0\n" + GOOD))]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "does not exist" in lines[0] and "epochs: Input should be greater" in lines[1]
    assert not (tmp_path / "out").exists()  # nothing written for a rejected file


def test_select_filter_sample_and_limit_are_seeded_and_stable():
    config, _ = load_sweep_text('dataset = "starter-bash"\nsample = 3\nseed = 5')
    first = select_tasks(config.tasks[0], None)
    assert len(first) == 3 and first == select_tasks(config.tasks[0], None)
    assert [t.index for t in first] == sorted(t.index for t in first)
    config, _ = load_sweep_text('dataset = "starter-bash"\nindices = [1, 3]')
    assert [t.index for t in select_tasks(config.tasks[0], None)] == [1, 3]
    everything = load_tasks("starter-bash")
    word = everything[0].query.split()[-1]
    config, _ = load_sweep_text(f'dataset = "starter-bash"\nfilter = "{word}"')
    assert everything[0] in select_tasks(config.tasks[0], None)


def load_sweep_text(task_block: str):
    import tempfile
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.toml"
        path.write_text(f'name = "s"\noutput = "{directory}/o"\nstrategies = ["single"]\n'
                        f'[[models]]\nname = "oracle"\n[[tasks]]\n{task_block}\n')
        return load_sweep(path)


def test_plan_covers_every_cell_early_and_the_dispatcher_is_fair(tmp_path):
    config, _ = load_sweep(write(tmp_path, GOOD))
    sets = {t.label: select_tasks(t, None) for t in config.tasks}
    episodes = plan(config, sets)
    assert len(episodes) == 2 * 2 * (5 + 2)
    assert len({e.key for e in episodes}) == len(episodes)
    first_cells = {(e.key.model, e.key.strategy, e.key.task_set) for e in episodes[:4]}
    assert len(first_cells) == 4  # the first four of a model are four different cells
    dispatcher = FairQueue(episodes)
    # A slow model keeps its episodes in flight; the other still gets every other slot.
    taken = [dispatcher.take() for _ in range(6)]
    assert [e.model for e in taken].count("oracle") == 3
    for episode in taken:
        if episode.model == "openai/sim":
            dispatcher.done(episode)  # the fast model finishes at once
    nxt = [dispatcher.take() for _ in range(3)]
    assert all(e.model == "openai/sim" for e in nxt)  # the slow one holds 3 slots: it waits its turn
    dispatcher.put_back(nxt[0])
    assert dispatcher.take() == nxt[0]


def test_the_dispatcher_prefers_episodes_whose_image_has_a_container_to_spare():
    from tasks import Task

    def episode(n: int, image: str) -> PlannedEpisode:
        task = Task(kind="bash", dataset="d", index=n, query="q", gold="true", image=image)
        return PlannedEpisode(EpisodeKey("m", "single", "set", task.id, 0), task)

    # In plan order the images alternate; image "a" has 1 container, "b" has 3.
    episodes = [episode(n, "a" if n % 2 == 0 else "b") for n in range(8)]
    capacity = {"a": 1, "b": 3}
    dispatcher = FairQueue(episodes, capacity=capacity.get)
    taken = [dispatcher.take() for _ in range(4)]
    assert [e.task.image for e in taken] == ["a", "b", "b", "b"]  # a second "a" would need a new container
    assert dispatcher.images_in_flight == {"a": 1, "b": 3}
    nothing_spare = dispatcher.take()  # nothing fits: the next in order anyway, never a stall
    assert nothing_spare.task.image == "a" and nothing_spare.task.index == 2
    dispatcher.done(taken[0])
    dispatcher.put_back(nothing_spare)
    assert dispatcher.images_in_flight == {"a": 0, "b": 3}
    assert dispatcher.take() is nothing_spare  # put back first, and "a" has room again
    unsteered = FairQueue(episodes)  # no capacity given: plan order
    assert [unsteered.take().task.index for _ in range(4)] == [0, 1, 2, 3]


def test_the_queue_steers_by_the_containers_of_plain_images_only():
    from environments.runtime import Runtime
    from foundation.local import LocalProvider

    class Counted(LocalProvider):  # a provider whose images have containers to count
        def capacity(self, image: str) -> int | None:
            return 2

    runtime = Runtime(None, Counted())
    assert runtime.capacity("intercode/nl2bash-fs-1") == 2
    # a shared database server serves every episode at once; a kind without containers has no image
    assert runtime.capacity("intercode/sql") is None and runtime.capacity("intercode/sql-spider") is None
    assert runtime.capacity("") is None


@pytest.mark.parametrize("name", ["quickstart.toml", "intercode-paper.toml"])
def test_the_example_sweep_files_are_valid(name):
    from foundation.settings import PROJECT_ROOT

    config, _ = load_sweep(PROJECT_ROOT / "examples" / name)
    assert config.models and config.tasks
    if name == "intercode-paper.toml":
        assert {t.dataset for t in config.tasks} >= {"nl2bash-fs1", "spider", "mbpp", "ctf"}
        assert config.strategies == ["single", "try_again", "react", "plan_solve", "plan_solve_refine"]


def test_the_progress_table_counts_per_model_and_task_set(tmp_path):
    import io

    from rich.console import Console

    from orchestrator.store import EpisodeRecord, LLMCall, Stored, TurnRecord
    from orchestrator.sweep.progress import SweepProgress

    config, _ = load_sweep(write(tmp_path, GOOD))
    episodes = plan(config, {t.label: select_tasks(t, None) for t in config.tasks})
    done = {episodes[0].key: Stored(success=True, failed=False)}
    progress = SweepProgress(Console(file=io.StringIO(), width=200))
    progress.plan(episodes, done)
    sim = [e for e in episodes if e.model == "openai/sim" and e.key.task_set == "starter-sql"]
    for episode, reward in zip(sim[:2], (1.0, 0.5)):
        progress.started(episode)
        record = EpisodeRecord(key=episode.key, env="sql", dataset="starter-sql", task_index=0, query="q", gold="g",
                               image="i", max_turns=10, started_at=0.0,
                               turns=[TurnRecord("o", "a", "obs", reward, True)],
                               calls=[LLMCall("openai/sim", None, 10, 5, 0.1, 1, None)])
        progress.finished(episode, record)
    console = Console(file=io.StringIO(), width=200)
    console.print(progress.table())
    row = next(line for line in console.file.getvalue().splitlines() if "openai/sim" in line and "starter-sql" in line)
    assert "2/4" in row and "1 (50%)" in row and "? (2 calls)" in row  # 2 unpriced calls: never "$0"
    oracle = next(line for line in console.file.getvalue().splitlines() if "oracle" in line and "starter-bash" in line)
    assert "1/10" in oracle and "1 (100%)" in oracle  # the episode an earlier run stored
    assert progress.summary().startswith(f"3/{len(episodes)} episodes stored (2 this run")


# ------------------------------------------------------------------ bounded plans (issue 27, item 5)

# Runs the command from a small process of its own: a child's peak RSS (ru_maxrss) counts what it
# held before its exec, and a child forked from pytest would start with pytest's hundred MB.
MEASURE = """
import json, resource, subprocess, sys, time
try:
    done = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=float(sys.argv[1]))
    code, err = done.returncode, done.stderr
except subprocess.TimeoutExpired as exc:
    code, err = "timeout", exc.stderr or ""
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = usage.ru_utime + usage.ru_stime  # what it did, whatever else the machine was doing
print(json.dumps([code, err if isinstance(err, str) else err.decode(), cpu, usage.ru_maxrss]))
"""


def run_measured(argv: list[str], timeout: float = 20.0) -> tuple[int | str, str, float, int]:
    """`python -m orchestrator ARGV` in a subprocess: its exit code ("timeout" when killed past
    `timeout`), stderr, CPU seconds and peak RSS in KB."""
    import json
    import subprocess
    import sys

    from foundation.settings import PROJECT_ROOT

    out = subprocess.run([sys.executable, "-c", MEASURE, str(timeout), sys.executable, "-m", "orchestrator", *argv],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout
    code, err, seconds, peak_kb = json.loads(out)
    return code, err, seconds, peak_kb


def test_an_absurd_epoch_count_is_one_line_within_a_second_with_flat_memory(tmp_path):
    """Refused before anything is planned: the process's CPU time, not the wall clock, which a loaded
    machine stretches (1.13 s beside stress-ng --cpu 2 on 2026-12-06, for 0.5 s of work)."""
    path = write(tmp_path, "epochs = 99999999999999999999\n" + GOOD)
    code, err, cpu, peak_kb = run_measured(["sweep", str(path)], timeout=60)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith("error: ") and "epochs" in lines[0] and "1000" in lines[0]
    assert peak_kb < 300 * 1024
    print(f"absurd epochs: {cpu:.2f} s of CPU, peak RSS {peak_kb / 1024:.0f} MB")
    assert cpu < 1.0


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: "epochs = 1001\n" + t, "epochs: Input should be less than or equal to 1000"),
    (lambda t: t.replace("limit = 2", "sample = 1000001"),
     "tasks.1.sample: Input should be less than or equal to 1000000"),
    (lambda t: t.replace("limit = 2", "limit = 1000001"), "tasks.1.limit: Input should be less than or equal to 1000000"),
    (lambda t: t + '[pools]\n"intercode/bash" = 4097\n', "max_size: Input should be less than or equal to 4096"),
    (lambda t: t + "".join(f'[[models]]\nname = "openai/m{n}"\nlocal = {{}}\n' for n in range(100)),
     "models: List should have at most 100 items"),
    (lambda t: t + "".join(f'[[tasks]]\ndataset = "starter-bash"\nname = "s{n}"\n' for n in range(100)),
     "tasks: List should have at most 100 items"),
])
def test_every_count_has_a_maximum(tmp_path, change, expected):
    message = error_of(tmp_path, change(GOOD))
    assert expected in message and "\n" not in message


def test_a_plan_over_the_maximum_is_refused_before_it_is_built(tmp_path):
    import time

    sets = "".join(f'[[tasks]]\ndataset = "starter-bash"\nname = "s{n}"\n' for n in range(21))
    text = ('name = "big"\noutput = "OUT"\nepochs = 1000\nstrategies = ["single", "try_again", "react", "plan_solve", '
            '"plan_solve_refine", "single_fenced", "try_again_fenced", "react_fenced", "plan_solve_fenced", "tools"]\n'
            '[[models]]\nname = "oracle"\n' + sets)
    config, _ = load_sweep(write(tmp_path, text))
    task_sets = {t.label: select_tasks(t, None) for t in config.tasks}
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        plan(config, task_sets)
    assert time.monotonic() - started < 0.1  # checked, not built
    message = str(caught.value)
    assert "1,050,000 episodes (105 tasks × 1 model × 10 strategies × 1000 epochs)" in message
    assert "more than the 1,000,000 a sweep may plan" in message and "\n" not in message


# ------------------------------------------------------------------ the smaller ones (issue 27, item 10)

@pytest.mark.parametrize("line", ["episode_timeout = inf", "engine_wait = inf", "episode_timeout = nan"])
def test_an_endless_time_is_refused_with_one_line(tmp_path, line):
    message = error_of(tmp_path, line + "\n" + GOOD)
    assert line.split()[0] in message and "finite number" in message and "\n" not in message


def test_a_models_endless_timeout_is_refused_with_one_line(tmp_path):
    message = error_of(tmp_path, GOOD.replace('name = "oracle"', 'name = "oracle"\ntimeout = inf'))
    assert "models.0.timeout" in message and "finite number" in message


def test_a_sample_larger_than_the_task_set_is_refused_with_one_line():
    config, _ = load_sweep_text('dataset = "starter-bash"\nsample = 6')
    with pytest.raises(ConfigError) as caught:
        select_tasks(config.tasks[0], None)
    message = str(caught.value)
    assert "`sample` = 6 is more than the 5 tasks" in message and "starter-bash" in message and "\n" not in message
    config, _ = load_sweep_text('dataset = "starter-bash"\nsample = 5')  # all of them, as a sample: allowed
    assert len(select_tasks(config.tasks[0], None)) == 5


def test_a_data_dir_from_the_sweep_file_is_named_as_such(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("INTERCODE_DATA_DIR", raising=False)
    missing = tmp_path / "no-data"
    path = write(tmp_path, f'data_dir = "{missing}"\n' + GOOD.replace('"starter-sql"', '"spider"'))
    assert main(["sweep", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert f"data directory {missing} (from the sweep file's data_dir) does not exist" in line
    assert "--data-dir" not in line.split("does not exist")[0] and "\n" not in line
    assert main(["sweep", str(path), "--data-dir", str(tmp_path / "flagged")]) == 2
    assert "(from --data-dir)" in capsys.readouterr().err  # the flag wins, and is named


def test_one_engine_outage_is_once_not_1_times():
    from types import SimpleNamespace

    from orchestrator.sweep.progress import SweepProgress

    summaries = []
    for outages in (1, 2):
        progress = SweepProgress(quiet=True)
        progress.attach(None, SimpleNamespace(watch=SimpleNamespace(outages=outages, down_since=None)))
        summaries.append(progress.summary())
    assert summaries[0].endswith("the Docker engine went away once, episodes re-run")
    assert summaries[1].endswith("the Docker engine went away 2 times, episodes re-run")




def test_a_large_plan_stops_when_the_sweep_is_interrupted():
    """974,000 episodes take seconds to plan: the sweep plans in a thread (its event loop hears a
    SIGTERM meanwhile, task_sets._planned), which stops at its next epoch once told to."""
    import threading
    import time

    from tasks import Task

    config = SweepConfig.model_validate({"name": "large", "output": "/nowhere", "strategies": ["single"], "epochs": 1000,
                                         "models": [{"name": "oracle"}], "tasks": [{"dataset": "starter-bash"}]})
    tasks = {"x": [Task(kind="bash", dataset="x", index=i, query="q", gold="g", image="") for i in range(974)]}
    stop, told = threading.Event(), []
    timer = threading.Timer(0.3, lambda: (told.append(time.monotonic()), stop.set()))
    timer.start()
    episodes = plan(config, tasks, stop)
    lag = time.monotonic() - told[0]
    timer.join()
    assert episodes == []  # nobody will run a plan that was stopped
    print(f"a plan of 974,000 episodes stopped {lag:.3f} s after being told")
    complete = plan(config, {"x": tasks["x"][:10]})
    assert len(complete) == 10_000  # a plan nobody stops is whole


def test_a_new_default_keeps_every_sweeps_identity_so_that_its_output_resumes():
    """`host_env` (issue 45) is a new field of every [[tasks]]: left empty, a sweep is the one it was
    before it existed, and its output directory resumes (these were the identities before it)."""
    from foundation.settings import PROJECT_ROOT
    from orchestrator.sweep.config import load_sweep

    before = {"quickstart.toml": "6c056cdf2599aaff", "installed-agent/sweep.toml": "1fd7be4247bfebd2"}
    for name, identity in before.items():
        config, _ = load_sweep(PROJECT_ROOT / "examples" / name)
        assert config.identity() == identity, name
    config, _ = load_sweep(PROJECT_ROOT / "examples" / "quickstart.toml")
    harbor = config.model_copy(update={"tasks": [TaskSetConfig(harbor="tasks/x", host_env=["HF_TOKEN"])]})
    plain = config.model_copy(update={"tasks": [TaskSetConfig(harbor="tasks/x")]})
    assert harbor.identity() != plain.identity()  # what a task may take from this machine changes its episodes


def test_a_relative_output_starts_at_the_sweep_file_as_its_other_paths_do(tmp_path, monkeypatch):
    """The README says a sweep file's paths start at its directory: `output` too (issues 46, 47),
    wherever the sweep is started from; --output is where you are."""
    from orchestrator.sweep.config import load_sweep

    folder = tmp_path / "sweeps"
    folder.mkdir()
    (folder / "s.toml").write_text('name = "s"\noutput = "runs/s"\nstrategies = ["tools"]\n[[models]]\nname = "oracle"\n'
                                   '[[tasks]]\ndataset = "starter-bash"\n')
    monkeypatch.chdir(tmp_path)
    config, _ = load_sweep(folder / "s.toml")
    assert config.output == folder / "runs" / "s"
    config, _ = load_sweep(folder / "s.toml", {"output": Path("elsewhere")})
    assert config.output == Path("elsewhere")


def test_the_field_s_agents_run_by_name_at_the_pinned_version_or_the_one_asked(tmp_path):
    """As Harbor's `-a NAME` (issue 46): `strategies = ["claude-code", "codex"]` needs no [[agents]]
    table; `version` runs another release, the rest as known; a table's own fields win."""
    from agents.catalog import KNOWN
    from orchestrator.sweep.config import ConfigError, load_sweep

    head = 'name = "s"\noutput = "o"\n[[models]]\nname = "oracle"\n[[tasks]]\ndataset = "starter-bash"\n'
    path = tmp_path / "s.toml"
    path.write_text('strategies = ["claude-code", "codex", "mini-swe-agent", "tools"]\n' + head)
    config, _ = load_sweep(path)
    agents = {a.name: a for a in config.agents}
    assert agents["claude-code"].npm == [f"@anthropic-ai/claude-code@{KNOWN['claude-code'].version}"]
    assert agents["codex"].npm == [f"@openai/codex@{KNOWN['codex'].version}"] and agents["codex"].tool == "exec_command"
    assert agents["mini-swe-agent"].pip == [f"mini-swe-agent=={KNOWN['mini-swe-agent'].version}"]
    path.write_text('strategies = ["codex"]\n' + head + '[[agents]]\nname = "codex"\nversion = "0.172.0"\ntimeout = 99\n')
    config, _ = load_sweep(path)
    [codex] = config.agents
    assert (codex.npm, codex.timeout, codex.command) == (["@openai/codex@0.172.0"], 99, KNOWN["codex"].command)
    other = config.identity()
    path.write_text('strategies = ["codex"]\n' + head)
    assert load_sweep(path)[0].identity() != other  # another version: other episodes
    path.write_text('strategies = ["mine"]\n' + head + '[[agents]]\nname = "mine"\nversion = "1"\npip = ["six"]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="`version` is for the agents known by name"):
        load_sweep(path)
