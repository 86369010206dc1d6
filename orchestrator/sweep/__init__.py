"""The sweep: a TOML file of models × strategies × task sets, run in parallel into a results store.

    python -m orchestrator sweep examples/quickstart.toml

`config` validates the file, `plan` lists its episodes in a fair order, `levels` runs the sweep's
levels (`task_sets`, `stored_run`, `sweep_models`, `sites` with `local_site`, `workers` over the
`fair_queue`), `runner` runs one episode with its time limit and failure class, `progress` shows
them.
"""
