"""The differential harness's pure parts: comparing answers, classifying differences, the report,
and the rewriting of the original's Dockerfiles. Needs neither an engine nor the original's venv."""

from __future__ import annotations

from checks.differential.cases import Case, Suite, shards
from checks.differential.turn_compare import (
    TurnRecord,
    agree,
    classify,
    differences,
    self_agrees,
    tally,
    term_agrees,
)
from checks.differential.original_images import IMAGES, derive, instructions
from checks.differential.report import headline, render


def bash_answer(reward: float, fs: float = 0.33, content: float = 0.33, output: float = 0.33,
                observation: str = "out") -> dict:
    return {"reward": reward, "observation": observation,
            "terms": {"file_diff": fs, "file_changes": content, "answer_similarity": output}}


def record(action: str, ours: dict, original: dict, again: dict | None = None, *, kind: str = "bash",
           source: str = "recording", gold: str = "ls") -> TurnRecord:
    return TurnRecord("suite", source, kind, "fs1#0", 0, action, gold, ours, original, again)


def test_rewards_agree_within_float_noise_only():
    assert agree(record("ls", bash_answer(1.0000000000000002), bash_answer(1.0)))
    assert not agree(record("ls", bash_answer(0.99, output=0.32), bash_answer(1.0)))


def test_terms_are_compared_one_by_one():
    r = record("ls", bash_answer(0.67, output=0.0), bash_answer(0.67, content=0.0))
    assert agree(r)  # same sum, different terms
    assert term_agrees(r, "fs") and not term_agrees(r, "content") and not term_agrees(r, "output")


def test_tally_counts_terms_self_agreement_and_turns_left_out():
    records = [record("ls", bash_answer(1.0), bash_answer(1.0), bash_answer(1.0)),
               record("date", bash_answer(0.67, output=0.0), bash_answer(1.0), bash_answer(0.67, output=0.0)),
               record("ls", {"error": "reset failed"}, {"error": "reset failed"})]
    t = tally(records)
    assert (t.turns, t.agree, t.uncompared) == (2, 1, 1)
    assert t.term_share("fs") == 1.0 and t.term_share("output") == 0.5
    assert (t.self_turns, t.self_agree) == (2, 1)


def test_classes_first_the_original_against_itself_then_the_action():
    noisy = record("ls", bash_answer(0.67, output=0.0), bash_answer(1.0), bash_answer(0.67, output=0.0))
    assert self_agrees(noisy) is False
    assert classify(noisy) == "the original disagrees with itself"
    aged = record("find /testbed -mmin -5", bash_answer(0.67, output=0.0), bash_answer(1.0), bash_answer(1.0))
    assert classify(aged).startswith("file ages")
    archive = record("tar czf /a.tgz /testbed", bash_answer(0.67, content=0.0), bash_answer(1.0))
    assert classify(archive).startswith("archive timestamps")
    background = record("sleep 3 &", bash_answer(0.67), bash_answer(1.0))
    assert classify(background) == "background processes"
    plain = record("echo hi", bash_answer(0.67, output=0.0, observation="a"), bash_answer(1.0, observation="b"))
    assert classify(plain) == "other: output term, different observation"


def test_a_side_that_raised_is_its_own_class_and_a_common_failure_none():
    crashed = record("def f (x): pass", {"reward": 0.0, "observation": ""},
                     {"error": "AttributeError: 'NoneType' object has no attribute 'group'"}, kind="python")
    assert classify(crashed) == "the original raised (AttributeError)"
    both = record("ls", {"error": "reset failed (x)"}, {"error": "reset failed (x)"})
    assert differences([crashed, both]) == {"the original raised (AttributeError)": [crashed]}


def test_headline_has_every_figure_and_bash_counts_recordings_only():
    records = [record("ls", bash_answer(1.0), bash_answer(1.0), bash_answer(1.0)),
               record("ls", bash_answer(0.67, output=0.0), bash_answer(1.0), source="gold"),
               record("SELECT 1", {"reward": 1.0}, {"reward": 1.0}, kind="sql", source="gold"),
               record("SELECT 2", {"reward": 0.0}, {"reward": 1.0}, kind="sql")]
    figures = headline(records)
    assert list(figures) == ["bash_agreement", "bash_fs_term", "bash_content_term", "bash_output_term",
                             "sql_agreement", "python_agreement", "ctf_agreement", "original_bash_self_agreement"]
    assert figures["bash_agreement"] == "1.000" and figures["bash_output_term"] == "1.000"
    assert figures["sql_agreement"] == "0.500" and figures["python_agreement"] == "n/a"
    text = render(records, 90.0)
    assert text.splitlines()[-8:] == [f"{k}: {v}" for k, v in figures.items()]
    assert "[sql] 1 turns differ" in text and "wall time: 1.5 min" in text


def test_the_original_dockerfiles_are_rewritten_onto_our_base():
    original = ("FROM ubuntu:latest\n# tools\nRUN apt-get update && \\\n    apt-get install -y bash netcat git && \\\n"
                "    rm -rf /var/lib/apt/lists/*\nRUN pip3 install pycryptodome\nENV file_system_version=1\n"
                "COPY ../docker/bash_scripts/$script /\nWORKDIR /\n")
    assert instructions(original)[1] == ("RUN apt-get update && apt-get install -y bash netcat git && "
                                         "rm -rf /var/lib/apt/lists/*")
    lines = derive(original, IMAGES["nl2bash-fs3"]).splitlines()
    assert lines[1] == "FROM debian:bookworm-slim"
    # Ubuntu's closure had procps (ps, uptime, w ran in the recordings); bash 5.1 pinned after the apt line
    assert "apt-get install -y procps bash netcat-openbsd git" in lines[2] and "bash/bullseye" in lines[3]
    assert lines[4].startswith("RUN apt-get update && apt-get install -y python3-pycryptodome")
    assert "ENV file_system_version=3" in lines and "COPY docker/bash_scripts/$script /" in lines


def test_the_mysql_image_becomes_mariadb_with_the_dump_loaded_at_build():
    original = ('FROM mysql\nENV MYSQL_ROOT_PASSWORD="password"\n'
                'ADD ./data/sql/bird/ic_bird_dbs.sql /docker-entrypoint-initdb.d')
    text = derive(original, IMAGES["sql"], ["--lower_case_table_names=1"])
    assert "COPY data/sql/spider/ic_spider_dbs.sql /docker-entrypoint-initdb.d/" in text
    assert "RUN sh /usr/local/bin/icdiff-sql-init.sh --lower_case_table_names=1" in text
    assert "MYSQL_ROOT_PASSWORD" not in text and '"--lower_case_table_names=1"]' in text


def test_a_suite_is_cut_into_consecutive_shards_in_order():
    from tasks import load_tasks

    task = load_tasks("starter-python")[0]
    suite = Suite("gold-x", "python", "gold", "starter-python",
                  tuple(Case(f"c{i}", task, ("pass",)) for i in range(10)))
    parts = shards(suite, 3)
    assert [p.name for p in parts] == ["gold-x.0", "gold-x.1", "gold-x.2"]
    assert [c.key for p in parts for c in p.cases] == [f"c{i}" for i in range(10)]
    assert shards(suite, 8) == [suite]  # too small to cut


def test_the_script_the_original_side_runs_is_there():
    """`./dev differential` runs this file in the original's virtualenv by its path: a rename that
    forgets it breaks the harness, which `./dev test` does not run (issue 28's renamed it once)."""
    from checks.differential.original import DRIVER

    assert DRIVER.is_file() and DRIVER.read_text().startswith('"""'), DRIVER
