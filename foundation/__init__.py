"""The foundation layer: errors, settings, the engine client and its watch, logging, concurrency
helpers, the container pool and the Sandbox protocol. It imports nothing above it (the contract in
pyproject.toml, checked by tests/unit/test_layers.py)."""
