-- The results store: one SQLite database per sweep output directory (OUTDIR/results.db).
-- Written only by the sweep and read only through orchestrator/store (for report, export, compare,
-- nightly and the viewer: no other part queries it).
-- Times are Unix seconds (REAL). JSON columns hold UTF-8 JSON text.

PRAGMA foreign_keys = ON;

-- One row per key: 'schema_version', 'sweep' (name), 'identity' (hash of what defines the
-- episode set; a different sweep may not write into this directory).
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per invocation of `sweep` on this directory (the first run, then each resume).
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY,
    sweep       TEXT NOT NULL,            -- the sweep's name
    identity    TEXT NOT NULL,            -- hash of the episode-defining config (same as meta)
    sweep_hash  TEXT NOT NULL,            -- sha256 of the sweep file's bytes (lineage)
    git_sha     TEXT,                     -- the project's commit; NULL outside a git checkout
    config_json TEXT NOT NULL,            -- the validated sweep config
    host        TEXT NOT NULL,
    started_at  REAL NOT NULL,
    finished_at REAL,
    status      TEXT NOT NULL,            -- running | finished | interrupted | failed
    spent_usd    REAL NOT NULL DEFAULT 0, -- what its model calls cost (priced ones), as of its last stored episode
    spent_tokens INTEGER NOT NULL DEFAULT 0
);

-- One row per finished episode; committed when the episode ends. An episode's identity is
-- (sweep, model, strategy, task_set, task_id, epoch): a resume skips identities already here,
-- except infra_error and budget_exhausted rows, which it runs again; such a row stays until the
-- new record replaces it. A budget_exhausted episode is incomplete: reports leave it out of rates
-- and means and count it apart.
CREATE TABLE IF NOT EXISTS episodes (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs(id),
    sweep             TEXT NOT NULL,
    model             TEXT NOT NULL,      -- the name in the sweep file (litellm name, oracle, ...)
    strategy          TEXT NOT NULL,      -- single | try_again | react | plan_solve
    task_set          TEXT NOT NULL,      -- the task set's name in the sweep file
    task_id           TEXT NOT NULL,      -- "<dataset>/<index>"
    epoch             INTEGER NOT NULL,   -- 0-based
    env               TEXT NOT NULL,      -- bash | sql | python | ctf
    dataset           TEXT NOT NULL,
    task_index        INTEGER NOT NULL,
    query             TEXT NOT NULL,
    gold              TEXT NOT NULL,
    status            TEXT NOT NULL,      -- solved | submitted | max_turns | model_error |
                                          -- budget_exhausted | timeout | task_error | infra_error |
                                          -- verifier_error (a Harbor verifier gave no reward) |
                                          -- agent_error (an agent of yours raised) |
                                          -- verifier_offline (a Harbor verifier needed the internet)
    failure_class     TEXT,               -- NULL | model | task | infra | verifier | agent | network
    error             TEXT,               -- one line, when the episode failed
    reward            REAL NOT NULL,      -- best reward over the turns (0 when none)
    success           INTEGER NOT NULL,   -- 1 when reward == 1 and not budget_exhausted
    n_turns           INTEGER NOT NULL,
    max_turns         INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd          REAL,               -- NULL when no call could be priced
    unpriced_calls    INTEGER NOT NULL DEFAULT 0,
    attempts          INTEGER NOT NULL,   -- 1 + infrastructure retries
    image             TEXT NOT NULL,
    image_digest      TEXT,
    host              TEXT,               -- where its containers ran: the machine, or a cluster's host
    served_model      TEXT,               -- the model name the provider reported serving
    started_at        REAL NOT NULL,
    finished_at       REAL NOT NULL,
    UNIQUE (sweep, model, strategy, task_set, task_id, epoch)
);

-- The turns of an episode, in order (idx from 0).
CREATE TABLE IF NOT EXISTS turns (
    episode_id  INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    output      TEXT NOT NULL,            -- the model's whole answer
    action      TEXT,                     -- the code taken from it; NULL when it held none
    observation TEXT NOT NULL,
    reward      REAL NOT NULL,
    executed    INTEGER NOT NULL,
    breakdown   TEXT,                     -- JSON: the parts of the reward this turn computed, where the
                                          -- kind gives them (Harbor's reward.json, a reward of your own)
    started_s   REAL,                     -- when it began, seconds since the episode began (its model call)
    duration_s  REAL,                     -- from then to the end of its last action or scoring
    call_idx    INTEGER,                  -- the call whose answer it is: llm_calls.idx, the transcript's call
    spans       TEXT,                     -- JSON [[kind, start_s, duration_s], ...]: call | action | reward
    rewritten   TEXT,                     -- what the dialogue kept in place of the answer (Try Again's parser)
    PRIMARY KEY (episode_id, idx)
);

-- Every successful LLM call of an episode, in order.
CREATE TABLE IF NOT EXISTS llm_calls (
    episode_id        INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    idx               INTEGER NOT NULL,
    model             TEXT NOT NULL,
    served_model      TEXT,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s         REAL NOT NULL,
    attempts          INTEGER NOT NULL,
    cost_usd          REAL,
    started_s         REAL,               -- when it began, seconds since the episode began
    PRIMARY KEY (episode_id, idx)
);

-- An episode's transcript: every message its model calls sent, the tools they offered and each
-- answer with what else the provider sent (orchestrator/store/transcript.py: each distinct message
-- once, a call as runs of message numbers; the body is zlib-compressed JSON of that `format`).
-- Stores written before it, or by a sweep with `transcripts = false`, have no row.
CREATE TABLE IF NOT EXISTS transcripts (
    episode_id INTEGER PRIMARY KEY REFERENCES episodes(id) ON DELETE CASCADE,
    format     INTEGER NOT NULL,
    calls      INTEGER NOT NULL,          -- model calls in it
    body       BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS episodes_by_cell ON episodes (model, strategy, task_set);
-- The viewer's orders of a whole store, each read forwards or backwards (view/queries.py SORTS),
-- and one task in every cell and epoch (its task page).
CREATE INDEX IF NOT EXISTS episodes_by_task ON episodes (task_id, epoch);
CREATE INDEX IF NOT EXISTS episodes_by_reward ON episodes (reward DESC, id);
CREATE INDEX IF NOT EXISTS episodes_by_turns ON episodes (n_turns DESC, id);
CREATE INDEX IF NOT EXISTS episodes_by_status ON episodes (status, id);
CREATE INDEX IF NOT EXISTS episodes_by_tokens ON episodes ((prompt_tokens + completion_tokens) DESC, id);
CREATE INDEX IF NOT EXISTS episodes_by_cost ON episodes (coalesce(cost_usd, -1) DESC, id);
-- The rewards of every turn without their texts (the viewer's charts read them all).
CREATE INDEX IF NOT EXISTS turns_rewards ON turns (episode_id, idx, reward);
