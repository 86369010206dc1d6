"""The sweep: a TOML file of models × strategies × task sets, run in parallel into a results store.

    python -m orchestrator sweep examples/quickstart.toml

`config` validates the file, `plan` lists its episodes in a fair order, `runner` runs one episode
with its time limit and failure class, `scheduler` runs them all, `progress` shows them.
"""
