"""The strategies: Single Turn and Try Again (try_again.py), ReAct (react.py) and Plan & Solve
(plan_solve.py), each one loop run by the paper's rules or ours (rules.py); and `tools`
(tools.py), which acts through native function calling.

Looked up by name through `agents.base.get_strategy`; each is a small class with `run`.
"""
