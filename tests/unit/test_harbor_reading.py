"""Harbor task folders as the field writes them, read without Docker (tests/fixtures/harbor-published):
real published headers are accepted, a typo is a warning, and every broken folder is its own line,
never the whole set's; task.toml's fields as Harbor 0.26's TaskConfig reads them; rewards outside
[0, 1] and a verifier that could not reach the network are the verifier's failures."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from environments.base import VerifierError
from environments.harbor import OFFLINE, _in_range, _number, _numbers
from foundation.settings import PROJECT_ROOT
from tasks.harbor import read_harbor
from tasks.harbor_config import Malformed, Unsupported, read_config

PUBLISHED = PROJECT_ROOT / "tests" / "fixtures" / "harbor-published"


@pytest.fixture(scope="module")
def tasks():
    return {t.name: t for t in read_harbor(PUBLISHED, "published")}


@pytest.mark.parametrize("name", ["tb21-header", "tb2-docker-image", "harbor-026-fields", "no-python-no-apt",
                                  "busybox-scratch"])
def test_a_published_header_is_read_with_nothing_refused(tasks, name):
    meta = tasks[name].meta
    assert tasks[name].unavailable is None and meta["warnings"] == [] and tasks[name].image


def test_terminal_bench_21s_header_gives_its_workdir_and_sizes(tasks):
    meta = tasks["tb21-header"].meta
    assert (meta["workdir"], meta["memory_mb"], meta["storage_mb"], meta["cpus"]) == ("/app", 2048, 10240, 1.0)
    assert meta["allow_internet"] is False and meta["agent_timeout"] == 120.0


def test_a_prebuilt_image_beside_its_dockerfile_is_kept_for_the_build(tasks):
    assert tasks["tb2-docker-image"].meta["docker_image"] == "alexgshaw/tb2-docker-image:20251031"


def test_harbor_026_fields_network_mode_and_healthcheck(tasks):
    meta = tasks["harbor-026-fields"].meta
    assert meta["allow_internet"] is False
    assert meta["healthcheck"] == {"command": "test -f /app/ready", "interval_sec": 1.0, "timeout_sec": 30.0,
                                   "start_period_sec": 0.0, "start_interval_sec": 5.0, "retries": 2}


def test_a_tasks_time_limit_and_what_it_offers_its_agent_are_read_with_it():
    """The agent's timeout and the verifier's (each step's), and a minute; MCP servers or skills."""
    fixtures = PROJECT_ROOT / "tests" / "fixtures" / "harbor"
    read = {name: read_harbor(fixtures / name, "fixtures")[0] for name in ("hello-file", "multi-step", "mcp-lookup",
                                                                           "skills")}
    assert read["hello-file"].time_limit == 120.0 + 30.0 + 60.0
    assert read["multi-step"].time_limit == 2 * (120.0 + 30.0) + 60.0
    assert [name for name, task in read.items() if task.offers_extras] == ["mcp-lookup", "skills"]
    step = replace(read["skills"], query="the next step", meta={**read["skills"].meta, "step_index": 1})
    assert step.offers_extras and step.time_limit == read["skills"].time_limit  # a step's run keeps them


def test_a_typo_is_a_warning_and_the_task_still_runs(tasks):
    meta = tasks["typo-agent2"].meta
    assert tasks["typo-agent2"].unavailable is None and meta["warnings"] == [
        "task.toml: unknown table [agent2], ignored (as Harbor ignores it): did you mean [agent]?"]


@pytest.mark.parametrize(("name", "words", "malformed"), [
    ("malformed-toml", "task.toml is not valid TOML: Expected ']'", True),
    ("missing-instruction", "instruction.md is missing", True),
    ("absolute-link-in-tests", "tests/expected.txt is a link to /etc/hostname, outside the task's folder", True),
    ("instruction-link-outside", "instruction.md is a link to ../../../../README.md, outside the task's folder", True),
    ("tb1-task", "a Terminal-Bench 1 task (task.yaml): convert it to Harbor's format with `harbor tasks migrate", False),
])
def test_a_broken_folder_is_its_own_line_beside_the_others(tasks, name, words, malformed):
    reason = tasks[name].unavailable
    assert reason.startswith(f"{name}: ") and words in reason and "\n" not in reason
    assert bool(tasks[name].malformed) is malformed and tasks[name].image == ""
    assert len(tasks) == 16  # every folder is a task: none dropped, none refusing the rest


def test_a_link_out_of_the_folder_never_becomes_the_prompt(tasks):
    assert tasks["instruction-link-outside"].query == ""


def test_a_folder_with_neither_task_toml_nor_instruction_is_no_task(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "instruction.md").write_text("do it")
    found = read_harbor(tmp_path, "t")
    assert [t.name for t in found] == ["one"] and found[0].unavailable == "one: task.toml is missing"


def config(text: str) -> tuple[dict, list[str]]:
    return read_config(text)


@pytest.mark.parametrize(("text", "error", "words"), [
    ('[environment]\nmcp_servers = [{name = "s", transport = "stdio", command = "srv"}]', Unsupported, "over stdio"),
    ('[environment]\nmcp_servers = [{name = "s", transport = "streamable-http"}]', Malformed, "needs a `url`"),
    ('[[steps]]\nname = "../up"', Malformed, "needs a `name`"),
    ('[[steps]]\nname = "one"\n[[steps]]\nname = "one"', Malformed, "twice"),
    ('[[steps]]\nname = "one"\nmin_reward = "high"', Malformed, "min_reward"),
    ('artifacts = [{source = "/x", service = "db"}]', Unsupported, "service 'db'"),
    ('multi_step_reward_strategy = "max"', Malformed, "multi_step_reward_strategy"),
    ('[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "separate"', Unsupported,
     "a separate verifier per step) is not supported here"),
    ('[verifier]\nenvironment_mode = "apart"', Malformed, 'must be "shared" or "separate"'),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ndocker_image = "x"', Malformed,
     "takes no [verifier.environment] table"),
    ('[environment]\ngpus = 1', Unsupported, "`gpus`"),
    ('[environment]\nos = "windows"', Unsupported, "only Linux"),
    ('[solution]\nenv = { KEY = "${HOME}" }', Unsupported, "stored with the oracle's action"),
    ('[environment]\nmemory = "2G"\nmemory_mb = 1024', Malformed, "disagree"),
    ('[environment]\nstorage = "lots"', Malformed, "expected a size"),
    ('[environment]\nnetwork_mode = "sometimes"', Malformed, "one of public, no-network, allowlist"),
    ('[environment]\nworkdir = "app"', Malformed, "absolute path"),
    ('[agent]\ntimeout_sec = -1', Malformed, "positive number of seconds"),
    ('environment = 3', Malformed, "must be a table"),
])
def test_what_changes_a_run_and_cant_be_honoured_is_named(text, error, words):
    with pytest.raises(error, match=None) as raised:
        config(text)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_what_does_not_change_a_run_is_accepted_silently():
    settings, warnings = config('version = "2.0"\nsource = "x"\nartifacts = ["/app/out"]\n[task]\nname = "o/t"\n'
                                '[metadata]\nfree = { any = 1 }\n[environment]\nskills_dir = "/skills"\nmcp_servers = []\n'
                                'gpus = 0\ngpu_types = ["H100"]\nmemory = "512M"\nstorage = "1G"\n')
    assert warnings == [] and (settings["memory_mb"], settings["storage_mb"]) == (512, 1024)


def test_a_likely_typo_is_a_warning_naming_what_was_meant():
    _, warnings = config('[agent]\ntimout_sec = 5\n[environment]\ncpu = 2\n[verifer]\ntimeout_sec = 9\n'
                         '[[steps]]\nname = "one"\nmin_rewrd = 1\n[steps.agent]\ntimeout_se = 3\n')
    assert warnings == [
        "task.toml: unknown table [verifer], ignored (as Harbor ignores it): did you mean [verifier]?",
        "task.toml: unknown key `timout_sec` in [agent], ignored (as Harbor ignores it): did you mean `timeout_sec`?",
        "task.toml: unknown key `cpu` in [environment], ignored (as Harbor ignores it): did you mean `cpus`?"], warnings
    settings, _ = config('[[steps]]\nname = "one"\nmin_rewrd = 1\n[steps.agent]\ntimeout_se = 3\n')
    assert settings["steps"][0]["warnings"] == [
        "task.toml: unknown key `min_rewrd` in [[steps]] one, ignored (as Harbor ignores it): did you mean `min_reward`?",
        "task.toml: unknown key `timeout_se` in [[steps]] one's agent, ignored: did you mean `timeout_sec`?"]


def test_a_corpus_s_own_tables_and_keys_are_accepted_in_silence():
    """Published corpora carry tables and keys of their own (Terminal-Bench 2.x's `[reference_pattern]`):
    Harbor ignores them, and so do we, without a warning that would make `tasks check` cry wolf."""
    _, warnings = config('version = "2.0"\n[reference_pattern]\nregex = "x"\n[tb]\nsplit = "hard"\n'
                         'difficulty = "hard"\n[verifier]\ntimeout_sec = 60\nexpert_time_estimate_min = 30\n'
                         '[environment]\nbenchmark_only = true\n')
    assert warnings == []


@pytest.mark.parametrize(("text", "internet"), [
    ("", True),  # Harbor's default: public
    ("[environment]\nallow_internet = false", False),
    ('[environment]\nnetwork_mode = "no-network"', False),
    ('[environment]\nnetwork_mode = "no-network"\n[verifier]\nnetwork_mode = "public"', True),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]', True),
])
def test_the_network_a_task_asks_for(text, internet):
    assert config(text)[0]["allow_internet"] is internet


def test_a_template_is_resolved_from_this_machine_only_when_the_task_runs(monkeypatch):
    monkeypatch.setenv("INTERCODE_TEST_TOKEN", "secret")
    settings, _ = config('[verifier]\nenv = { TOKEN = "${INTERCODE_TEST_TOKEN}", MODE = "${MODE_UNSET:-fast}" }')
    assert settings["verifier_env"] == {"TOKEN": "${INTERCODE_TEST_TOKEN}", "MODE": "${MODE_UNSET:-fast}"}  # kept
    from tasks.harbor_config import resolve
    assert resolve(settings["verifier_env"], ["INTERCODE_TEST_TOKEN"]) == {"TOKEN": "secret", "MODE": "fast"}
    assert resolve(settings["verifier_env"]) == {"TOKEN": "", "MODE": "fast"}  # not allowed: never read


@pytest.mark.parametrize("text", ["7", "-0.5", "1.0001", "nan", "inf"])
def test_a_reward_outside_0_1_is_the_verifiers_error(text):
    with pytest.raises(VerifierError, match=r"reward\.txt is .*, not a reward in \[0, 1\]"):
        _number(text, "/logs/verifier/reward.txt")


def test_reward_json_values_are_numbers_and_each_in_range():
    assert _numbers('{"reward": 1, "part": true}') == {"reward": 1.0, "part": 1.0}
    with pytest.raises(VerifierError, match="`note` is \"fine\", not a number"):
        _numbers('{"reward": 1, "note": "fine"}')
    with pytest.raises(VerifierError, match="is 3, not a reward"):
        _in_range(3.0, "reward.json's `count`")
    assert _in_range(0.0, "x") == 0.0 and math.isclose(_number(" 0.25\n", "r"), 0.25)


@pytest.mark.parametrize(("line", "offline"), [
    ("curl: (6) Could not resolve host: astral.sh", True),
    ("WARNING: Retrying ... Failed to establish a new connection: [Errno -3] Temporary failure in name resolution", True),
    ("Err:1 http://deb.debian.org/debian bookworm InRelease\n  Temporary failure resolving 'deb.debian.org'", True),
    ("error: dns error: failed to lookup address information: Name or service not known", True),
    ("curl: (7) Failed to connect to localhost port 8080: Connection refused", False),  # the agent's own service
    ("FAILED tests/test_outputs.py::test_answer - AssertionError", False),
])
def test_what_a_verifier_without_a_network_prints(line, offline):
    assert bool(OFFLINE.search(line)) is offline


def test_the_agent_s_and_the_verifier_s_users_are_taken_as_harbor_takes_them():
    """Harbor runs the agent (and the solution) as [agent] user and the tests as [verifier] user,
    each the image's USER when unset (None here); a step's own user, else the task's."""
    settings, _ = config('[agent]\nuser = "agent"\n[verifier]\nuser = 0\n[[steps]]\nname = "one"\n'
                         '[steps.agent]\nuser = "1000:1000"\n')
    assert (settings["agent_user"], settings["verifier_user"]) == ("agent", "0")
    assert (settings["steps"][0]["agent_user"], settings["steps"][0]["verifier_user"]) == ("1000:1000", None)
    settings, _ = config("")
    assert (settings["agent_user"], settings["verifier_user"]) == (None, None)
    for bad in ('"a b"', "-1", "true", '"x:y:z"'):
        with pytest.raises(Malformed, match="must be a user name or a UID"):
            config(f"[agent]\nuser = {bad}\n")


def test_a_separate_verifier_is_read_as_harbor_reads_it():
    """Harbor's separate verifier: a mode, or a [verifier.environment] table alone; its image the
    table's docker_image, else tests/Dockerfile, else the task's own (tasks/harbor.py)."""
    settings, warnings = config('[verifier]\nenvironment_mode = "separate"\n')
    assert settings["verifier_separate"] and settings["verifier_docker_image"] is None and warnings == []
    settings, _ = config('[verifier.environment]\ndocker_image = "judge:1"\nworkdir = "/judge"\nenv = { A = "1" }\n')
    assert settings["verifier_separate"] and settings["verifier_docker_image"] == "judge:1"
    assert (settings["verifier_workdir"], settings["verifier_environment_env"]) == ("/judge", {"A": "1"})
    assert not config("")[0]["verifier_separate"]
    task = {t.name: t for t in read_harbor(PROJECT_ROOT / "tests" / "fixtures" / "harbor", "h")}["separate-verifier"]
    assert task.meta["verifier_context"].endswith("separate-verifier/tests") and task.unavailable is None
