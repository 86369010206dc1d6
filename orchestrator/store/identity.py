"""A store holds one sweep: the line that refuses another, naming what changed.

The store keeps the sweep's identity (one hash) and, beside it, the parts it is made of, each by
name (the sweep file; each file of yours a task set or an agent is read from) with its digest.
When a run's identity is not the store's, the parts say which of them changed, and so what to
restore; a store written before the parts were kept gets them at its next resume, and until then
its refusal names the places to look.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

PARTS = "identity_parts"  # the meta key of the parts, a JSON object: name -> digest
NEW_SWEEP = "or choose another `output` in the sweep file (or give --output DIR) to start a new sweep"


def encode_parts(parts: Mapping[str, str]) -> str:
    return json.dumps(dict(parts), sort_keys=True)


def refusal(outdir: Path, meta: Mapping[str, str], identity: str, parts: Mapping[str, str] | None) -> str:
    """One line: `outdir` holds another sweep's results; what changed, and what to do."""
    head = (f"{outdir} holds results of a different sweep ({meta.get('sweep')!r}, identity {meta.get('identity')}; "
            f"this run's is {identity})")
    changed = _changed(meta.get(PARTS), parts)
    if not changed:
        return (f"{head}: its sweep file, or a file its task sets or agents are read from, changed since its first "
                f"run: restore it, {NEW_SWEEP}")
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    return f"{head}: {changed[0]}{more} changed since its first run: restore it, {NEW_SWEEP}"


def _changed(stored: str | None, parts: Mapping[str, str] | None) -> list[str]:
    """The parts whose digests differ (the sweep file first); [] when either side has none."""
    if stored is None or not parts:
        return []
    try:
        before = json.loads(stored)
    except ValueError:
        return []
    if not isinstance(before, dict):
        return []
    return [name for name, digest in parts.items() if name in before and before[name] != digest]
