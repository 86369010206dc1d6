"""The viewer's full-text search (issue 37): what it looks in (the prompts the model was sent, the
error, the gold, besides the task and the turns) and how it reads what is typed (AND, OR, phrases,
prefixes; nothing typed is FTS5 syntax). On stores written by the sweep's own writer, their index
built by the viewer's own code; no engine needed."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from orchestrator.store import EpisodeRecord, TurnRecord
from orchestrator.store.async_reader import connect
from orchestrator.store.episode_query import EpisodeFilter, episode_page, episode_texts
from orchestrator.store.search_index import TextIndex
from orchestrator.store.search_query import fts_query, words
from orchestrator.store.transcript import Transcript, prompt_lines
from orchestrator.view.lists import snippets
from tests.stores import episode_record, transcript_store

# The index as version 1 made it: four columns, filled from the episodes and their turns.
VERSION_1 = ("CREATE VIRTUAL TABLE episode_text USING fts5(task, outputs, actions, observations, content='', "
             "tokenize='unicode61 remove_diacritics 2')")
VERSION_1_ROWS = """
INSERT INTO episode_text (rowid, task, outputs, actions, observations)
SELECT e.id, e.task_id || ' ' || e.query,
       (SELECT group_concat(output, char(10)) FROM store.turns t WHERE t.episode_id = e.id),
       (SELECT group_concat(action, char(10)) FROM store.turns t WHERE t.episode_id = e.id),
       (SELECT group_concat(observation, char(10)) FROM store.turns t WHERE t.episode_id = e.id)
FROM store.episodes e
"""


def episode(task: int, seen: str = "", *, system: str = "", user: str = "", error: str | None = None,
            gold: str = "ls") -> EpisodeRecord:
    """A one-turn episode whose every text is known: `seen` in its observation, `system` and `user`
    in the prompts of its one model call, its error and gold."""
    record = episode_record(task, solved=False)
    record.turns = [TurnRecord("```\nls\n```", "ls", f"a.txt\n{seen}", 0.0, True)]
    record.transcript = Transcript()
    record.transcript.record([{"role": "system", "content": f"You run commands. {system}"},
                              {"role": "user", "content": f"{record.query} {user}"}],
                             {"role": "assistant", "content": "```\nls\n```"})
    record.error, record.gold = error, gold
    return record


def found(out: Path, text: str, full_text: bool = True) -> list[str]:
    """The task ids a search of the store at OUT finds, its index brought up to date first (with
    `full_text` False: the search while the index is built, in the tasks' ids and queries)."""
    index = TextIndex(out / "results.db")
    index.update()
    with closing(connect(out / "results.db")) as db:
        if full_text:
            index.attach(db)
        listed = episode_page(db, EpisodeFilter.from_query({"text": text}), full_text)
        return sorted(row.key.task_id for row in listed.rows)


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Episode 0 with a word in its system prompt only, 1 in a user prompt only, 2 in its error only,
    3 in its gold only."""
    return transcript_store(tmp_path_factory.mktemp("texts") / "out", "texts", [
        episode(0, system="Quetzal mode."), episode(1, user="Mind the wombat."),
        episode(2, error="TimeoutError: kraken did not answer"), episode(3, gold="ls /zeppelin | wc -l")])


@pytest.mark.parametrize(("word", "task"), [("quetzal", 0), ("wombat", 1), ("kraken", 2), ("zeppelin", 3)])
def test_a_word_only_in_a_prompt_the_error_or_the_gold_finds_its_episode(texts, word, task):
    assert found(texts, word) == [f"starter-bash/{task}"]


@pytest.mark.parametrize(("word", "where"), [("quetzal", "prompt"), ("wombat", "prompt"), ("kraken", "error"),
                                             ("zeppelin", "gold")])
def test_a_hit_only_in_a_prompt_the_error_or_the_gold_shows_where(texts, word, where):
    index = TextIndex(texts / "results.db")
    index.update()
    with closing(connect(texts / "results.db")) as db:
        index.attach(db)
        listed = episode_page(db, EpisodeFilter.from_query({"text": word}), True)
        ids = [row.id for row in listed.rows]
        shown = snippets(episode_texts(db, ids, word), word, 0)
    assert len(shown) == 1, shown
    (piece,) = shown.values()
    assert f">{where}</a>:</span>" in piece and f"<mark>{word}</mark>" in piece.lower(), piece


def test_an_index_of_version_1_is_built_again_with_the_new_texts(tmp_path):
    out = transcript_store(tmp_path / "out", "old-index", [episode(0), episode(1, gold="ls /zeppelin")])
    index = TextIndex(out / "results.db")
    index.update()
    with closing(sqlite3.connect(index.path, isolation_level=None)) as db:  # as version 1 left it
        db.execute("ATTACH DATABASE ? AS store", (str(out / "results.db"),))
        db.execute("DROP TABLE episode_text")
        db.execute(VERSION_1)
        db.execute(VERSION_1_ROWS)
        db.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    assert found(out, "zeppelin") == ["starter-bash/1"]


def test_a_store_made_before_transcripts_were_kept_is_indexed_without_them(tmp_path):
    out = transcript_store(tmp_path / "out", "no-transcripts",
                           [episode(0, system="quetzal"), episode(1, gold="ls /zeppelin")])
    with closing(sqlite3.connect(out / "results.db")) as db:
        db.execute("DROP TABLE transcripts")
        db.commit()
    assert found(out, "zeppelin") == ["starter-bash/1"] and found(out, "quetzal") == []


def test_a_transcript_that_cannot_be_read_leaves_out_its_prompts_only(tmp_path):
    out = transcript_store(tmp_path / "out", "broken", [episode(0, system="quetzal"),
                                                        episode(1, system="quetzal", gold="ls /zeppelin")])
    with closing(sqlite3.connect(out / "results.db")) as db:
        db.execute("UPDATE transcripts SET body = x'00ff' WHERE episode_id = "
                   "(SELECT id FROM episodes WHERE task_id = 'starter-bash/1')")
        db.commit()
    assert found(out, "quetzal") == ["starter-bash/0"] and found(out, "zeppelin") == ["starter-bash/1"]


def test_the_prompts_indexed_are_each_distinct_line_once_and_no_answer():
    transcript = Transcript()
    sent = [{"role": "system", "content": "Be brief.\nUse Bash."}, {"role": "user", "content": "Count them."}]
    for k in range(3):
        answer = {"role": "assistant", "content": f"ls {k}"}
        transcript.record(sent, answer)
        sent = [*sent, answer, {"role": "user", "content": [{"type": "text", "text": f"Output: {k}\nUse Bash."}]}]
    assert prompt_lines(transcript.encode()) == ["Be brief.", "Use Bash.", "Count them.", "Output: 0", "Output: 1"]


@pytest.fixture(scope="module")
def greek(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Observations: 0 alpha, 1 beta, 2 "alpha beta", 3 "beta alpha" (both, not as the phrase)."""
    return transcript_store(tmp_path_factory.mktemp("greek") / "out", "greek", [
        episode(0, "alpha"), episode(1, "beta"), episode(2, "alpha beta"), episode(3, "beta alpha")])


@pytest.mark.parametrize(("text", "tasks"), [
    ("alpha OR beta", [0, 1, 2, 3]),
    ("alpha AND beta", [2, 3]),
    ("alpha beta", [2, 3]),
    ('"alpha beta"', [2]),
    ("(alpha OR beta)", [0, 1, 2, 3]),  # parentheses are no syntax; the OR between the words is
    ("beta OR alpha beta", [1, 2, 3]),  # AND binds before OR: beta, or alpha and beta
    ("alpha beta OR gamma", [2, 3]),
    ('"alpha beta" OR "beta alpha"', [2, 3]),
    ("alp* AND bet*", [2, 3]),
    ("alpha and beta", []),  # lower-case: the word "and" is in no episode
    ("alpha or beta", []),
    ('"alpha OR beta"', []),  # quoted: a phrase of three words
    ("OR", []),  # an operator with nothing on one side is the word
    ("alpha OR", []),
    ("alpha OR OR beta", [0, 2, 3]),  # alpha, or the word "or" and beta (no episode holds "or")
])
def test_and_or_phrases_and_prefixes(greek, text, tasks):
    assert found(greek, text) == [f"starter-bash/{t}" for t in tasks]


@pytest.mark.parametrize(("text", "tasks"), [
    ("NEAR(alpha beta)", []),  # as FTS5's NEAR: 2 and 3
    ("alpha NOT beta", []),  # as FTS5's NOT: 0
    ("alpha -beta", [2, 3]),  # a dash is no NOT
    ("observations:alpha", []),  # as FTS5's column filter: 0, 2 and 3
    ("{observations}: alpha", []),
    ("^alpha", [0, 2, 3]),  # as FTS5's start of a column: none (the observation starts with a.txt)
    ("alpha + beta", [2, 3]),
    ("alpha*beta", [2]),  # a star inside a word is no prefix: the phrase "alpha beta"
])
def test_fts5_syntax_typed_is_text(greek, text, tasks):
    assert found(greek, text) == [f"starter-bash/{t}" for t in tasks]


HOSTILE = ['"', '"unclosed alpha', 'a"b', "alpha)", "(", ")", "((alpha", "'", "alpha''", "*", "**", "alpha**",
           "NEAR/2", "NEAR(", "AND", "AND OR", "OR AND alpha", "alpha AND OR", "- -", "-alpha", ":", "alpha:",
           "\x00alpha", "alpha\\", '"alpha" "', '""alpha""', "*alpha", "alpha OR *", "AND AND AND", "%", "_"]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_input_makes_a_bad_query(greek, text):
    """Either one line saying there is no word in it, or a search that runs (in the index, and in the
    tasks while the index is built)."""
    try:
        EpisodeFilter.from_query({"text": text})
    except ConfigError as exc:
        assert "no word" in str(exc)
        return
    found(greek, text)
    found(greek, text, full_text=False)


def test_the_query_and_the_words_marked():
    assert fts_query("alpha OR beta gamma") == '("alpha") OR ("beta" "gamma")'
    assert fts_query("alpha AND beta") == '"alpha" "beta"'
    assert fts_query("alpha and beta") == '"alpha" "and" "beta"'
    assert fts_query('NEAR(a "b c"* OR') == '"NEAR(a" "b c" "OR"'
    assert words("alpha OR beta AND gamma") == ["alpha", "beta", "gamma"]
    assert words('"OR" and x*') == ["or", "and", "x"]


@pytest.mark.parametrize(("text", "tasks"), [
    ("starter-bash/1 OR starter-bash/2", [1, 2]),
    ("query AND starter-bash/3", [3]),
    ("starter-bash/1 starter-bash/2", []),
])
def test_while_the_index_is_built_the_tasks_are_searched_with_the_same_and_and_or(greek, text, tasks):
    assert found(greek, text, full_text=False) == [f"starter-bash/{t}" for t in tasks]
