"""Fidelity checks against the original benchmark: gold validation and trajectory replay."""
