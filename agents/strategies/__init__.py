"""The strategies: Single Turn and Try Again (try_again.py), ReAct (react.py) and Plan & Solve
(plan_solve.py), each one loop run by the paper's rules or ours (rules.py); `tools` (tools.py),
which acts through native function calling; `terminus` (terminus.py), which types into a terminal
as Harbor's Terminus-2 does. Agents of yours run as strategies too: external.py (a Python file),
installed.py (a CLI agent in the task's container).

Looked up by name through `agents.base.get_strategy`; each is a small class with `run`.
"""
