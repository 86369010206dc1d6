"""`replay` reads every format the original's scripts wrote and replays each turn by the rule of the
script that recorded it; `replay --table DIR` recomputes the paper's success table from a directory
of them. The recordings are synthetic, in the exact shapes the scripts wrote (eval_n_turn.py,
eval_react.py, eval_plan_solve.py, eval_ctf.py, the environment's save_trajectory for the human
study), of real tasks, with the rewards the original would have recorded; they replay through real
containers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import main
from orchestrator.fidelity.trajectories import read_episodes

pytestmark = pytest.mark.docker

SPIDER = "./data/sql/spider/ic_spider_dev.json"
FS1 = "./data/nl2bash/nl2bash_fs_1.json"
TEACHERS, CONDUCTORS = 15, 3  # Spider dev tasks; the teachers' gold orders 7 names by age
FIRST_TWO = "SELECT Name FROM teacher ORDER BY Age ASC LIMIT 2"  # 2 of 7 rows, in order: 0.29
WRONG_COUNT = "SELECT count(*) FROM conductor"  # 6 conductors, 5 nationalities: 0
SQL_RETRY = "No SQL code was found in your last response.\n\nYour response should be a SQL command."
REACT_NO_CODE = "Error executing query: Your last `execute` action did not contain sql code"
IN_PLAIN_SIGHT = 4  # the CTF task whose flag is in the file `flag`


def spider(data_dir: Path, index: int) -> dict[str, Any]:
    return json.loads((data_dir / "sql" / "spider" / "ic_spider_dev.json").read_text())[index]


def recorded(data_dir: Path, kind: str, index: int, actions: list[Any], rewards: list[Any],
             observations: list[Any] | None = None, **columns: list[Any]) -> dict[str, Any]:
    """An episode as eval_n_turn.py / eval_react.py / eval_plan_solve.py / eval_ctf.py logged it."""
    if kind == "sql":
        environment, dataset, task = "ic_sql", SPIDER, spider(data_dir, index)
    elif kind == "bash":
        environment, dataset = "ic_bash", FS1
        task = json.loads((data_dir / "nl2bash" / "nl2bash_fs_1.json").read_text())[index]
    else:
        environment, dataset = "ic_ctf", "./data/ctf/ctf_test.json"  # eval_ctf.py's run used another file
        task = json.loads((data_dir / "ctf" / "ic_ctf.json").read_text())[index]
    history = {"actions": actions, "observations": observations or ["..."] * len(actions), "rewards": rewards,
               **columns}
    return {"environment": environment, "dataset": dataset, "task_id": index, "query": task["query"],
            "turn_history": history}


def n_turn(data_dir: Path, turns_max: int, episodes: list[dict[str, Any]]) -> dict[str, Any]:
    for episode in episodes:
        rewards = episode["turn_history"]["rewards"]
        episode["turn_history"].setdefault("valid_action", [True] * len(episode["turn_history"]["observations"]))
        episode["summary"] = {"max_reward": max(rewards), "max_reward_idx": rewards.index(max(rewards)),
                              "turns_taken": len(rewards), "turns_max": turns_max}
    return {str(i): e for i, e in enumerate(episodes)}


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2))
    return path


def single_file(data_dir: Path) -> dict[str, Any]:
    """eval_n_turn.py --max_turns 1: the gold (1.0) and a wrong count (0)."""
    return n_turn(data_dir, 1, [recorded(data_dir, "sql", TEACHERS, [spider(data_dir, TEACHERS)["gold"]], [1.0]),
                                recorded(data_dir, "sql", CONDUCTORS, [WRONG_COUNT], [0.0])])


def try_again_file(data_dir: Path) -> dict[str, Any]:
    """eval_n_turn.py --max_turns 3: a partial answer, a turn without code (retry message, nothing
    ran), the gold; a wrong count, then a policy that raised (`blocked`, no observation). The third
    episode is doctored: its wrong count is recorded as 1.0, so recorded and recomputed differ."""
    gold = spider(data_dir, TEACHERS)["gold"]
    first = recorded(data_dir, "sql", TEACHERS, [FIRST_TWO, "I am not sure yet.", gold], [0.29, 0, 1.0],
                     ["...", SQL_RETRY, "..."], valid_action=[True, False, True])
    blocked = recorded(data_dir, "sql", CONDUCTORS, [WRONG_COUNT, "blocked"], [0.0, 0], ["..."], valid_action=[True])
    doctored = recorded(data_dir, "sql", CONDUCTORS, [WRONG_COUNT], [1.0])
    return n_turn(data_dir, 3, [first, blocked, doctored])


def react_file(data_dir: Path) -> dict[str, Any]:
    """eval_react.py: raw `Action N:` texts; only `submit` scores. A solved SQL episode with a turn
    without code, one out of turns (the forced submit), and a solved Bash episode."""
    fs1_gold = json.loads((data_dir / "nl2bash" / "nl2bash_fs_1.json").read_text())[1]["gold"]
    solved = recorded(data_dir, "sql", TEACHERS,
                      [f"execute[{FIRST_TWO};]", "I should sort all of them.",
                       "execute[SELECT Name FROM teacher ORDER BY Age ASC]", "submit"], [0, 0, 0, 1.0],
                      ["...", REACT_NO_CODE, "...", "..."], thoughts=["t1", "t2", "t3", "t4"],
                      valid_action=[True, True, True, True])
    out_of_turns = recorded(data_dir, "sql", CONDUCTORS, [f"execute[{WRONG_COUNT}]", "execute[SELECT 1]", "submit"],
                            [0, 0, 0], thoughts=["t1", "t2", "EXCEEDED MAX TURNS: submit"],
                            valid_action=[True, True, True])
    bash = recorded(data_dir, "bash", 1, ["execute[ls /testbed/dir2/subdir2]", f"execute[{fs1_gold}]", "submit"],
                    [0, 0, 1.0], thoughts=["t1", "t2", "t3"], valid_action=[True, True, True])
    return {"0": solved, "1": out_of_turns, "2": bash}


def plan_solve_file(data_dir: Path, refine: bool) -> dict[str, Any]:
    """eval_plan_solve.py: a plan step without code (0), a partial one (0.29), each scored "if
    submitted now"; then, with --refine, a refine turn without code, which recorded the reward as
    it stood (0.29), and the gold (1.0)."""
    gold = spider(data_dir, TEACHERS)["gold"]
    actions, rewards, observations = ["I would list them.", FIRST_TWO], [0, 0.29], [SQL_RETRY, "..."]
    if refine:
        actions, rewards, observations = actions + ["Hmm.", gold], rewards + [0.29, 1.0], observations + [SQL_RETRY, ""]
    episode = recorded(data_dir, "sql", TEACHERS, actions, rewards, observations, steps=["list", "order"],
                       valid_action=[False, True] + [False, True] * refine)
    episode.update(info={}, summary={"max_reward": max(rewards), "max_reward_idx": rewards.index(max(rewards))})
    meta = {"data_path": SPIDER, "env": "sql", "image_name": "docker-env-sql", "log_dir": "logs", "proportion": None,
            "refine": refine, "refine_turns": 3 if refine else None, "seed": None, "verbose": False}
    return {"meta": meta, "logs": {str(TEACHERS): episode}}


def ctf_file(data_dir: Path) -> dict[str, Any]:
    """eval_ctf.py: `cmd` commands score 0, a wrong flag -1 (the policy's list: the first ran), the flag 1."""
    flag = json.loads((data_dir / "ctf" / "ic_ctf.json").read_text())[IN_PLAIN_SIGHT]["gold"]
    episode = recorded(data_dir, "ctf", IN_PLAIN_SIGHT, ["cmd cat flag", ["submit picoCTF{n0p3}"], f"submit {flag}"],
                       [0, -1, 1])
    episode["summary"] = {"max_reward": 1, "max_reward_idx": 2, "turns_taken": 3, "turns_max": 15,
                          "num_submissions": 2}
    return {"0": episode}


def human_file(data_dir: Path) -> list[dict[str, Any]]:
    """The human study: save_trajectory's records, one reward each (of the submit)."""
    def record(index: int, actions: list[str], reward: float) -> dict[str, Any]:
        task = spider(data_dir, index)
        steps = [{"action": a, "observation": "None" if a == "submit" else "..."} for a in actions]
        return {"environment": "ic_sql", "query_idx": index, "query": task["query"], "gold": task["gold"],
                "reward": reward, "trajectory": steps, "info": {}}

    return [record(TEACHERS, ["SELECT Name FROM teacher", FIRST_TWO, "submit"], 0.29),
            record(CONDUCTORS, [spider(data_dir, CONDUCTORS)["gold"], "submit"], 1.0)]


def flat_plan_solve_file(data_dir: Path) -> dict[str, Any]:
    """The earlier eval_plan_solve.py: a flat object keyed by task index, no meta; the actions are
    the model's raw answers, fenced, and ran as they were (a fenced query is a syntax error: 0); an
    answer without a fence ran and scored. No episode has turns after its plan: no refine round."""
    gold = spider(data_dir, CONDUCTORS)["gold"]
    fenced = f"```sql\n{gold}\n```"
    episode = recorded(data_dir, "sql", CONDUCTORS, [fenced, gold], [0, 1.0],
                       ["Error executing query: You have an error in your SQL syntax", "[(6,)]"],
                       steps=["Count the conductors.", "Submit the count."], valid_action=[False, True])
    episode.update(info={}, summary={"max_reward": 1.0, "max_reward_idx": 1})
    return {str(CONDUCTORS): episode}


def empty_plan(data_dir: Path) -> dict[str, Any]:
    """An eval_plan_solve.py episode whose plan came out empty: no step, no action, no observation,
    and one reward of 0."""
    episode = recorded(data_dir, "sql", CONDUCTORS, [], [0], [], steps=[], valid_action=[])
    episode.update(info={}, summary={"max_reward": 0, "max_reward_idx": 0})
    return episode


def replayed(tmp_path: Path, data_dir: Path, path: Path, capsys: pytest.CaptureFixture[str], code: int = 0
             ) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Per-turn results of `replay FILE` run in this process, and what it printed; `code`: the
    exit status expected (3: episodes were left out)."""
    out = tmp_path / "turns.json"
    status = main(["replay", str(path), "--data-dir", str(data_dir), "--json", str(out)])
    printed = capsys.readouterr().out
    assert status == code, printed
    return json.loads(out.read_text()), printed


def ours(turns: list[dict[str, Any]]) -> list[float | None]:
    return [t["ours"] for t in turns]


# ---------------------------------------------------------------- one test per format

def test_eval_n_turn_scores_if_submitted_now_and_runs_nothing_without_code(tmp_path, data_dir, capsys):
    path = write(tmp_path / "n_turn.json", try_again_file(data_dir))
    assert {e.strategy for e in read_episodes(path)} == {"Try Again"}
    turns, _ = replayed(tmp_path, data_dir, path, capsys)
    assert ours(turns["0"]) == [0.29, 0.0, 1.0]  # scored after each action; the retry turn ran nothing
    assert ours(turns["1"]) == [0.0, 0.0]  # `blocked`: the policy raised, nothing ran
    assert [t["agree"] for t in turns["0"] + turns["1"]] == [True] * 5
    assert turns["2"][0]["agree"] is False  # the doctored 1.0


def test_eval_react_parses_raw_actions_and_scores_only_submit(tmp_path, data_dir, capsys):
    path = write(tmp_path / "react.json", react_file(data_dir))
    assert {e.strategy for e in read_episodes(path)} == {"ReAct"}
    turns, printed = replayed(tmp_path, data_dir, path, capsys)
    # The gold ran at turn 3 but scores only at the submit (the n-turn rule would give 1.0 there).
    assert ours(turns["0"]) == [0.0, 0.0, 0.0, 1.0]
    assert ours(turns["1"]) == [0.0, 0.0, 0.0]  # the forced submit after the last turn
    assert ours(turns["2"]) == [0.0, 0.0, 1.0]  # Bash, through the original's container lifecycle
    assert all(t["agree"] for episode in turns.values() for t in episode), printed
    assert printed.splitlines()[-1] == "agreement: 1.000 (10 turns)"


def test_eval_plan_solve_keeps_the_reward_through_a_refine_turn_without_code(tmp_path, data_dir, capsys):
    path = write(tmp_path / "plan.json", plan_solve_file(data_dir, refine=True))
    (episode,) = read_episodes(path)
    assert (episode.key, episode.strategy, episode.plan_steps) == (str(TEACHERS), "Plan & Solve + refine", 2)
    turns, _ = replayed(tmp_path, data_dir, path, capsys)
    # No code: 0 in the plan, the reward as it stood in the refine round.
    assert ours(turns[str(TEACHERS)]) == [0.0, 0.29, 0.29, 1.0]
    assert all(t["agree"] for t in turns[str(TEACHERS)])


def test_the_earlier_flat_plan_solve_file_is_plan_and_solve_run_as_recorded(tmp_path, data_dir, capsys):
    path = write(tmp_path / "plan-flat.json", flat_plan_solve_file(data_dir))
    (episode,) = read_episodes(path)
    assert (episode.format, episode.strategy, episode.plan_steps) == ("eval_plan_solve", "Plan & Solve", 2)
    turns, _ = replayed(tmp_path, data_dir, path, capsys)
    assert [(t["ours"], t["agree"]) for t in turns[str(CONDUCTORS)]] == [(0.0, True), (1.0, True)]


def test_eval_ctf_scores_the_flag_with_the_environments_own_reward(tmp_path, data_dir, capsys):
    path = write(tmp_path / "ctf-gpt.json", ctf_file(data_dir))
    (episode,) = read_episodes(path)
    assert (episode.format, episode.strategy) == ("eval_ctf", "CTF")
    assert episode.turns[1].action == "submit picoCTF{n0p3}"  # the first of the policy's list
    turns, _ = replayed(tmp_path, data_dir, path, capsys)
    assert ours(turns["0"]) == [0.0, 0.0, 1.0]  # the wrong flag: ours 0, recorded -1, and the episode goes on
    assert [t["agree"] for t in turns["0"]] == [True, True, True]


def test_the_human_study_compares_its_one_reward_at_the_end(tmp_path, data_dir, capsys):
    path = write(tmp_path / "human.json", human_file(data_dir))
    episodes = read_episodes(path)
    assert [(e.format, e.kind, len(e.turns)) for e in episodes] == [("human", "sql", 3), ("human", "sql", 2)]
    turns, printed = replayed(tmp_path, data_dir, path, capsys)
    assert [(t["ours"], t["recorded"], t["agree"]) for t in turns["0"]][-1] == (0.29, 0.29, True)
    assert [(t["ours"], t["agree"]) for t in turns["1"]][-1] == (1.0, True)
    assert all(t["flag"] == "no recorded reward" for t in turns["0"][:-1] + turns["1"][:-1])
    assert printed.splitlines()[-1] == "agreement: 1.000 (2 turns; 3 flagged)"


# ---------------------------------------------------------------- the table

def test_the_table_of_a_mixed_directory(tmp_path, data_dir, capsys):
    root = tmp_path / "runs"
    write(root / "sql" / "a.json", single_file(data_dir))
    write(root / "sql" / "b.json", try_again_file(data_dir))
    write(root / "sql" / "c.json", react_file(data_dir))
    write(root / "plans" / "d.json", plan_solve_file(data_dir, refine=True))
    write(root / "plans" / "e.json", plan_solve_file(data_dir, refine=False))
    write(root / "ctf-gpt.json", ctf_file(data_dir))
    write(root / "human" / "f.json", human_file(data_dir))
    out = tmp_path / "table.json"
    assert main(["replay", "--table", str(root), "--data-dir", str(data_dir), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    cells = {(c["environment"], c["strategy"]): c for c in json.loads(out.read_text())["cells"]}
    figures = {cell: (c["episodes"], c["left_out"], c["recorded_solved"], c["recomputed_solved"], c["turns"],
                      c["agreed"]) for cell, c in cells.items()}
    assert figures == {
        ("sql", "Single"): (2, 0, 1, 1, 2, 2),
        ("sql", "Try Again"): (3, 0, 2, 1, 6, 5),  # the doctored episode: recorded solved, not recomputed
        ("sql", "ReAct"): (2, 0, 1, 1, 7, 7),
        ("bash", "ReAct"): (1, 0, 1, 1, 3, 3),
        ("sql", "Plan & Solve + refine"): (1, 0, 1, 1, 4, 4),
        ("sql", "Plan & Solve"): (1, 0, 0, 0, 2, 2),
        ("ctf", "CTF"): (1, 0, 1, 1, 3, 3),
        ("sql", "human"): (2, 0, 1, 1, 2, 2),
    }
    assert list(cells)[:2] == [("bash", "ReAct"), ("sql", "Single")]  # the paper's order
    try_again = cells[("sql", "Try Again")]
    assert (try_again["recorded"], try_again["recomputed"], try_again["agreement"]) == (0.6667, 0.3333, 0.8333)
    assert [f["file"] for f in try_again["files"]] == [str(root / "sql" / "b.json")]
    lines = [line.split() for line in printed.splitlines()]
    assert ["sql", "Try", "Again", "3", "0", "66.7%", "33.3%", "-33.3!", "6", "0.833", "sql/b.json"] in lines, printed
    assert ["sql", "Single", "2", "0", "50.0%", "50.0%", "+0.0", "2", "1.000", "sql/a.json"] in lines, printed
    assert "1 of 8 cells off by more than a point: sql Try Again" in printed


def test_single_from_the_first_turns_of_try_again_per_model_and_the_spread_of_two_runs(tmp_path, data_dir, capsys):
    """No single-turn file: Single is the first turn of each model's Try Again runs (the model read
    from the file name, as eval_n_turn.py wrote it). Two runs, one after the other, and their spread."""
    root = tmp_path / "runs"
    write(root / "ic_sql_multiturn_gpt-3.5_3_turns.json", try_again_file(data_dir))
    write(root / "ic_sql_multiturn_gpt-4_3_turns.json", try_again_file(data_dir))
    out = tmp_path / "table.json"
    assert main(["replay", "--table", str(root), "--runs", "2", "--data-dir", str(data_dir), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    document = json.loads(out.read_text())
    cells = {(c["model"], c["strategy"]): c for c in document["cells"]}
    assert list(cells) == [("gpt-3.5", "Single"), ("gpt-3.5", "Try Again"), ("gpt-4", "Single"), ("gpt-4", "Try Again")]
    single = cells[("gpt-4", "Single")]
    # First turns: 0.29, 0.0 and the doctored 1.0 recorded; 0.29, 0.0, 0.0 recomputed.
    assert (single["file"], single["episodes"], single["recorded_solved"], single["recomputed_solved"],
            single["turns"], single["agreed"]) == ("first turns of 1 Try Again file", 3, 1, 0, 3, 2)
    assert [(r["model"], r["strategy"], r["recomputed"], r["steady"]) for r in document["runs"]] == [
        ("gpt-3.5", "Single", [0.0, 0.0], True), ("gpt-3.5", "Try Again", [0.3333, 0.3333], True),
        ("gpt-4", "Single", [0.0, 0.0], True), ("gpt-4", "Try Again", [0.3333, 0.3333], True)]
    assert "steady: every cell within half a point across the 2 runs" in printed


def test_the_table_of_the_shared_single_turn_sql_file(tmp_path, data_dir, capsys):
    """The recorded GPT-4 Single run, the first 30 episodes: the table works on the real files."""
    root = tmp_path / "shared"
    root.mkdir()
    (root / "single.json").symlink_to(data_dir / "trajectories" / "sql" / "ic_sql_multiturn_gpt-4_1_turns.json")
    assert main(["replay", "--table", str(root), "--limit", "30", "--data-dir", str(data_dir), "--json", "-"]) == 0
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert (cell["environment"], cell["strategy"], cell["episodes"], cell["turns"]) == ("sql", "Single", 30, 30)
    assert cell["recorded_solved"] == cell["recomputed_solved"] and cell["agreement"] == 1.0


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("content", [[1, 2], "a string", [{"query": "q", "turns": []}]])
def test_a_file_in_no_known_format_is_one_line_naming_the_formats(tmp_path, capsys, content):
    path = write(tmp_path / "odd.json", content)
    assert main(["replay", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and str(path) in line
    for script in ("eval_n_turn", "eval_react", "eval_plan_solve", "eval_ctf", "human"):
        assert script in line, line
    assert main(["replay", "--table", str(tmp_path)]) == 2  # the same line within a directory
    assert capsys.readouterr().err.strip().splitlines() == [line]


def test_bad_episodes_are_counted_one_line_each_and_the_rest_scored(tmp_path, data_dir, capsys):
    episodes = react_file(data_dir)
    unknown = {**episodes["1"], "query": "Which tasks does nobody ask about?"}
    ungrammatical = recorded(data_dir, "sql", CONDUCTORS, ["SELECT 1", "submit"], [0, 0], ["(1,)", ""],
                             thoughts=["t1", "t2"])  # no execute[...], and yet it ran
    path = write(tmp_path / "react.json", {"0": episodes["0"], "7": unknown, "8": ungrammatical})
    turns, printed = replayed(tmp_path, data_dir, path, capsys, code=3)
    bad = [line.strip() for line in printed.splitlines() if line.strip().startswith(f"{path}: episode")]
    assert bad == [f"{path}: episode 7: task not found in the data",
                   f"{path}: episode 8: turn 1: ReAct's parser reads SELECT 1 as no code (neither execute[...] nor "
                   "submit), but the recording ran it"], printed
    assert "2 bad episodes" in printed
    assert ours(turns["0"]) == [0.0, 0.0, 0.0, 1.0] and all(t["agree"] for t in turns["0"])
    assert ours(turns["8"]) == [None, None]
    assert printed.splitlines()[-1] == "agreement: 1.000 (4 turns; 5 not scored)"


def test_an_episode_whose_lists_disagree_is_read_as_far_as_they_agree_and_the_table_goes_on(tmp_path, data_dir,
                                                                                            capsys):
    """In a good Plan & Solve file: an empty plan (no action, no observation, one reward), and an
    episode whose last action was logged without its observation and reward. Each is one line; the
    other episodes and files are scored, and the exit status says that episodes were left out."""
    good = plan_solve_file(data_dir, refine=False)
    cut = json.loads(json.dumps(good["logs"][str(TEACHERS)]))
    cut["turn_history"]["actions"].append(spider(data_dir, TEACHERS)["gold"])
    good["logs"].update({"40": empty_plan(data_dir), "41": cut})
    root = tmp_path / "runs"
    plans = write(root / "plans.json", good)
    write(root / "flat.json", flat_plan_solve_file(data_dir))
    episodes = {e.key: e for e in read_episodes(plans)}
    assert episodes["40"].turns == [] and "0 actions, 0 observations, 1 rewards" in episodes["40"].bad
    assert len(episodes["41"].turns) == 2 and "read as far as they agree: 2 turns" in episodes["41"].bad
    out = tmp_path / "table.json"
    assert main(["replay", "--table", str(root), "--data-dir", str(data_dir), "--json", str(out)]) == 3
    captured = capsys.readouterr()
    assert "2 bad episodes" in captured.out and f"{plans}: episode 40: the lists of turn_history" in captured.out
    assert "2 episodes left out" in captured.err
    cells = {c["strategy"]: c for c in json.loads(out.read_text())["cells"]}
    # Both files scored: the good episode of each, and the cut one's two turns (its episode left out).
    assert (cells["Plan & Solve"]["episodes"], cells["Plan & Solve"]["left_out"]) == (4, 2)
    assert (cells["Plan & Solve"]["turns"], cells["Plan & Solve"]["agreed"]) == (6, 6)
