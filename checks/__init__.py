"""Checks of our fidelity against the original InterCode harness, run by hand or by `./dev
differential`: the differential harness (`checks/differential/`: the original and ours driven with
the same actions) and the SQL checks (`checks/sql_fidelity.py`). Not benchmarks: they measure
agreement, not speed (docs/fidelity.md)."""
