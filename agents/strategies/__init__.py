"""The paper's prompting strategies: Single Turn, Try Again, ReAct and Plan & Solve.

Looked up by name through `agents.base.get_strategy`; each is a small class with `run`.
"""
