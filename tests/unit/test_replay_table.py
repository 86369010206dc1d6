"""The success table's cells: the model of a recording read from its file's name in every layout the
original's scripts wrote (and ours), or from the folders it sits in."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.fidelity.table import model_of

ROOT = Path("/data/results")


@pytest.mark.parametrize(("path", "model"), [
    ("ic_bash_multiturn_text-bison-001_10_turns_fs_2.json", "text-bison-001"),  # eval_n_turn.py, renamed per fs
    ("ic_bash_multiturn_starchat_10_turns_fs_1.json", "starchat"),
    ("ic_sql_multiturn_gpt-3.5-turbo_10_turns.json", "gpt-3.5-turbo"),
    ("ic_python_multiturn_chat-bison-001_7_turns.json", "chat-bison-001"),
    ("ic_bash_multiturn_Vicuna-13B_10_turns.json", "vicuna-13b"),
    ("ic_bash_multiturn_some-model-we-never-heard-of_10_turns.json", "some-model-we-never-heard-of"),
    ("ic_ctf_gpt-4_25_turns.json", "gpt-4"),
    ("text-davinci-003/ic_sql_plan_solve.json", "text-davinci-003"),  # named by its folder
    ("chat-bison-001/bash/ic_bash_react_10_turns.json", "chat-bison-001"),
    ("gpt-4/ic_bash_plan_solve_refine_3_turns.json", "gpt-4"),
    ("openai-gpt-4o__try_again__nl2bash.json", "openai-gpt-4o"),  # our export's
    ("ic_bash_plan_solve.json", ""),  # nothing names it
])
def test_the_model_is_read_from_the_name_or_the_folders(path, model):
    assert model_of(str(ROOT / path), ROOT) == model


def test_the_folder_replayed_names_the_model_of_the_files_in_it():
    assert model_of("/runs/text-bison-001/ic_bash_react_10_turns.json", Path("/runs/text-bison-001")) == "text-bison-001"
    assert model_of("/runs/gpt-4/ic_bash_react_10_turns.json", Path("/runs/gpt-4/")) == "gpt-4"
