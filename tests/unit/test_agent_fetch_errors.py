"""What pip or npm say when they can't fetch an agent is one line naming the cause (issue 46): npm's
404 is the line shown, not the path of its log; pip's last error line."""

from __future__ import annotations

import sys

import pytest

from foundation.errors import ImageError
from orchestrator.images.agent_layer import _run

NPM_404 = """npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@nobody%2fnothing - Not found
npm error 404
npm error 404  The requested resource '@nobody/nothing@1.0' could not be found or you do not have permission to access it.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-12-06T05_54_40_074Z-debug-0.log
"""
PIP_MISSING = """ERROR: Could not find a version that satisfies the requirement nothing-here==1.0 (from versions: none)
ERROR: No matching distribution found for nothing-here==1.0
"""


def failing(stderr: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stderr.write({stderr!r}); sys.exit(1)"]


@pytest.mark.parametrize(("tool", "stderr", "words"), [
    ("npm", NPM_404, "'@nobody/nothing@1.0' could not be found"),
    ("pip", PIP_MISSING, "No matching distribution found for nothing-here==1.0"),
])
def test_the_cause_is_the_line_shown(tool, stderr, words):
    with pytest.raises(ImageError) as raised:
        _run("probe", tool, failing(stderr), ["thing"])
    message = str(raised.value)
    assert words in message and "complete log" not in message and "\n" not in message, message
    assert message.startswith(f"agent 'probe': {tool} could not download thing: ") and message.endswith(f"fix its `{tool}`")
