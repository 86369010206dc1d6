"""`python -m orchestrator view OUTDIR...`: a local web app over sweeps' results stores.

Modules: `source` (one store, read-only, off the event loop), `queries` and `pairs` (the SQL of
lists, episodes and paired tasks), `layout` (the page shell and live script), `pages` and
`compare_pages` (HTML), `app` (aiohttp routes and serving) and `cli` (the command).
"""
