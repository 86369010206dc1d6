"""Reward functions, one module per kind, pure where they can be: unit-testable without containers."""
