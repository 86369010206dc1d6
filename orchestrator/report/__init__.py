"""Sweep reports: read OUTDIR/results.db, summarize per model × strategy × task set, render Markdown and HTML.

Modules: `stats` (pure statistics, shared with compare), `data` (reading results.db),
`summary` (per-cell numbers and curves), `view` (what a report shows), `svg`, `markdown`, `html`
(rendering) and `cli` (the command).
"""
