"""The field's agents by name, as they ship today (issue 46): Claude Code 2.x (its native binary,
from its platform package) and Codex CLI (its native binary; OpenAI's Responses API, the only one
it speaks), each at the version pinned in agents/catalog.py, with no [[agents]] table, on the five
starter Bash tasks and a Harbor folder with the oracle model, every call recorded.

Marked long: each agent's layer is a few hundred MB fetched and copied the first time
(./dev test-long, which CI runs)."""

from __future__ import annotations

import pytest

from foundation.settings import PROJECT_ROOT
from orchestrator.cli import main
from orchestrator.store.transcript import decode
from tests.stores import rows

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.long]
HELLO = PROJECT_ROOT / "tests" / "fixtures" / "harbor" / "hello-file"


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_agent_by_name_solves_the_starter_tasks_and_a_harbor_folder(tmp_path, capsys, agent):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'name = "{agent}"\noutput = "{tmp_path / "out"}"\nstrategies = ["{agent}"]\nmax_turns = 8\n'
                     '[[models]]\nname = "oracle"\n'
                     f'[[tasks]]\ndataset = "starter-bash"\n[[tasks]]\nharbor = "{HELLO}"\n')
    assert main(["sweep", str(sweep), "--quiet"]) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    found = dict(rows(out, "SELECT task_id, status FROM episodes"))
    starters = [status for task, status in found.items() if task.startswith("starter-bash/")]
    assert len(starters) == 5 and starters.count("solved") >= 4, found
    assert found["hello-file/hello-file"] == "solved", found
    errors = rows(out, "SELECT error FROM episodes WHERE error IS NOT NULL")
    assert not errors, errors
    # every episode's calls recorded (the oracle is no provider: its calls are in the transcripts, each
    # with what the agent sent and was answered)
    transcripts = [decode(body, fmt) for fmt, body in rows(out, "SELECT format, body FROM transcripts")]
    assert len(transcripts) == 6 and all(t.calls and all(c.sent for c in t.calls) for t in transcripts)
