"""The differential harness: the original InterCode harness and ours, driven with the same actions.

    python -m checks.differential [--env bash,sql,python,ctf] [--limit N] [--sources ...]

- `images`: the original's images, derived at run time from its Dockerfiles on our base image;
- `cases`: the action sequences (every gold, every recorded action, generated variants), as suites;
- `original` and `driver`: the original side, run by the original's own code in its own venv
  (`original_side.py` is executed by that venv's interpreter; nothing here imports the original);
- `ours`: our side, through the project's public API;
- `compare` and `report`: per-turn agreement, per Bash term, classes of difference.
"""
