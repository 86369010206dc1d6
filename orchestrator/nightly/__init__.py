"""Regression benchmarking: `compare BASELINE CURRENT` and `nightly SWEEP.toml --history DB`.

Modules: `outcomes` (the per-episode facts a comparison needs), `compare` (paired tests and a
verdict per cell, pure), `history` (the SQLite store of past nights), `flaky` (tasks that flip
across nights), `gate` (the oracle run that quarantines tasks whose gold broke), `trend` (the
inline-SVG trend chart), `render` (Markdown and HTML), `nightly` (one night, end to end) and
`cli` (both commands).
"""
