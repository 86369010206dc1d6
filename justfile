# InterCode Orchestrator tasks. Run through ./dev (it makes the virtualenv first): ./dev quickstart, ./dev test

set shell := ["bash", "-euo", "pipefail", "-c"]
set positional-arguments  # "$@" in a recipe: its arguments as given, quoting kept

python := ".venv/bin/python"
data_dir := env_var_or_default("INTERCODE_DATA_DIR", "../shared/intercode-data")
export LITELLM_LOCAL_MODEL_COST_MAP := "True"
# Python's bytecode cache kept where an environment turns it off (PYTHONDONTWRITEBYTECODE=1 in many
# containers): else every process compiles the project's modules again, and a test session starts hundreds
# (its pytest rewrites each test module again too). The __pycache__ folders are ignored by git.
export PYTHONDONTWRITEBYTECODE := ""

# List the recipes
default:
    @just --list

# Make sure a Docker engine answers (installs and starts one on Debian/Ubuntu as root)
engine:
    scripts/ensure-engine.sh

# Build the images that are missing or whose inputs changed (all when NAMES is empty)
images *NAMES: engine
    {{python}} -m orchestrator images build {{NAMES}} --data-dir {{data_dir}}

# Quickstart: the starter tasks × two offline models × two strategies (builds what it needs), then its report
quickstart: engine
    {{python}} -m orchestrator sweep examples/quickstart.toml

# Run a sweep file (resumes where it stopped), e.g. just sweep examples/intercode-paper.toml
sweep FILE *ARGS: engine
    {{python}} -m orchestrator sweep {{FILE}} {{ARGS}}

# A small demo of the warm pool alone
pool-demo: (images "nl2bash-fs1")
    {{python}} -m orchestrator pool demo --size 4 --episodes 16

# Headless Chromium, which the report tests render the HTML report in
chromium:
    scripts/ensure-chromium.sh

# The Docker-free tier, tests/unit, in three processes (a third of its tests' time is waiting on timers, retries and processes starting, which the third fills on two cores): no engine, no images, no browser (DOCKER_HOST points nowhere)
test-fast *ARGS:
    DOCKER_HOST=unix:///nonexistent/intercode-test-fast.sock {{python}} -m pytest tests/unit -n 3 -p no:cacheprovider --durations=10 "$@"

# The whole suite but the tests marked long, tier by tier, stopping at the first that fails: tests/unit first; meanwhile, in the background, the images, Chromium and the few tests marked `alone` (they need the engine to themselves, which the unit tier leaves them); then tests/docker and tests/browser in three processes (tests/cluster is all long). With ARGS, pytest ARGS alone after the images (e.g. ./dev test tests/docker/test_sweep.py -k quickstart)
test *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    pytest=({{python}} -m pytest -p no:cacheprovider)
    if [ $# -gt 0 ]; then
        {{just_executable()}} images && {{just_executable()}} chromium
        exec "${pytest[@]}" --durations=30 "$@"
    fi
    tier() { local name=$1 start=$SECONDS; shift; "$@" || return; echo "test: $name passed in $((SECONDS - start)) s"; }
    background=$(mktemp)
    set -m  # the background tier in a process group of its own, stopped whole if the unit tier fails
    ( tier "the images" {{just_executable()}} images && tier "Chromium" {{just_executable()}} chromium &&
      tier "the tests marked alone" "${pytest[@]}" tests/docker tests/cluster -m "alone and not long" --durations=5 ) > "$background" 2>&1 &
    beside=$!
    set +m
    if ! tier "tests/unit" {{just_executable()}} test-fast; then
        kill -TERM -- "-$beside" 2>/dev/null || true
        wait "$beside" || true
        exit 1
    fi
    status=0
    wait "$beside" || status=$?
    cat "$background"
    rm -f "$background"
    [ "$status" -eq 0 ] || exit "$status"
    tier "tests/cluster, docker, browser" "${pytest[@]}" tests/cluster tests/docker tests/browser -n 3 --dist loadfile --no-loadscope-reorder -m "not alone and not long" --durations=30
    echo "test: every tier passed in $SECONDS s"

# The tests marked long, one at a time, which ./dev test leaves out to keep within its 15 minutes: tests/cluster (a Ray cluster of three nodes, each with an engine of its own), whole replays (the paper's other models, the two slowest files), the engine stopped, frozen or half-hung mid-sweep, two sweeps on one engine, the field's agents by name and the npm and PyPI agents' layers, the hostile sweep beside honest episodes. CI runs it after ./dev test
test-long *ARGS: images
    {{python}} -m pytest -p no:cacheprovider tests/docker tests/cluster -m long --durations=10 "$@"

# Pool benchmark: lease, action round trip vs docker exec, reset vs create, actions/s
bench-pool: (images "nl2bash-fs1")
    {{python}} -m benchmarks.bench_pool

# LLM benchmark: 200 Try Again episodes against a scripted provider at 600 rpm / 200 ms (rpm share, 429 share, episodes lost)
bench-llm: (images "sql-starter")
    {{python}} -m benchmarks.bench_llm

# Sweep benchmark: oracle over NL2Bash fs 1-4 at concurrency 1 vs 16; a simulated 1 s LLM x 10 turns x 256 at once
bench-sweep: (images "nl2bash-fs1" "nl2bash-fs2" "nl2bash-fs3" "nl2bash-fs4" "sql-starter")
    {{python}} -m benchmarks.bench_sweep --data-dir {{data_dir}}

# Cluster benchmark: the oracle sweep locally vs through Ray on 1 and 3 hosts of a local 3-node cluster, the action round trip through Ray, the head's CPU per episode (IC_CLUSTER_SLOT=N beside another local cluster)
bench-cluster *ARGS: (images "nl2bash-fs1" "nl2bash-fs2" "nl2bash-fs3" "nl2bash-fs4")
    {{python}} -m benchmarks.bench_cluster --data-dir {{data_dir}} {{ARGS}}

# Viewer benchmark: a store of 100,000 episodes through the store's writer, then the overview and list pages over HTTP (p95; view_p95_ms)
bench-view *ARGS:
    {{python}} -m benchmarks.bench_view {{ARGS}}

# Two commits side by side in one run (ABBA): each from a worktree of its own, its images built by its own code, its bench-pool and bench-sweep, then its replay of the shared Bash trajectories; medians and ratios after/before. E.g. ./dev bench-revisions 73f091a
bench-revisions BEFORE *ARGS: engine
    {{python}} -m benchmarks.side_by_side {{BEFORE}} --data-dir {{data_dir}} {{ARGS}}

# Harbor side by side: Harbor's own oracle run (PyPI harbor in a venv of its own under a temporary directory) vs ours on tests/fixtures/harbor: reward per task on both sides, wall time ratio
bench-harbor *ARGS: engine
    {{python}} -m benchmarks.bench_harbor {{ARGS}}

# Agents: the gateway's overhead per call against a direct call of the same model; episodes/s of mini-swe-agent installed against the tools strategy, same tasks and model
bench-agents *ARGS: (images "starter" "driver-runtime")
    {{python}} -m benchmarks.bench_agents {{ARGS}}

# Tasks check from cold: four small Harbor tasks written afresh, their images built and checked, then checked warm; --before COMMIT runs that commit's side by side (ABBA), --runtime-cold counts the driver runtime's build
bench-tasks-check *ARGS: engine
    {{python}} -m benchmarks.bench_tasks_check {{ARGS}}

# File ages of a replay context, two ways side by side: aging the files (what replay does) vs Debian's libfaketime (DEB: `apt-get download libfaketime`), per action and per container
bench-file-ages DEB *ARGS: (images "nl2bash-fs3")
    {{python}} -m benchmarks.bench_file_ages {{DEB}} --data-dir {{data_dir}} {{ARGS}}

# Differential harness: the original InterCode harness (built from ../shared/intercode-original) and ours driven with the same actions; per-turn agreement (not part of `test`). E.g. ./dev differential --env bash --limit 5
differential *ARGS: engine
    {{python}} -m checks.differential --data-dir {{data_dir}} {{ARGS}}

# Refresh requirements.lock (with every file's hash) from pyproject.toml; indirect dependencies stay at their versions unless ./dev lock --upgrade
lock *ARGS:
    .venv/bin/uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --default-index "${PIP_INDEX_URL:-https://pypi.org/simple}" --custom-compile-command "./dev lock" --quiet --output-file requirements.lock {{ARGS}}
    {{python}} scripts/check_lock.py
