"""Sweep reports: summarize a sweep's results (read by orchestrator/store/results.py) per model ×
strategy × task set, render Markdown and HTML.

Modules: `stats` (pure statistics, shared with compare), `summary` (per-cell numbers and curves),
`content` (what a report shows), `svg`, `markdown`, `html` (rendering) and `cli` (the command).
"""
