"""Retake docs/viewer-episode.png: a small real sweep (the local simulated model, Try Again, the
starter Bash tasks: needs the engine and the starter image), then the viewer in headless Chromium
at 1,280 px, and the page of an episode of two turns or more from its timeline down.

    .venv/bin/python scripts/viewer_screenshot.py [OUT.png]

Look at the picture before committing it.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.view.app import serving  # noqa: E402
from orchestrator.view.source import Source  # noqa: E402
from tests.browser.test_view_browser import Browser  # noqa: E402

SWEEP = """name = "screenshot"
output = "{out}"
strategies = ["try_again"]
max_turns = 4
[[models]]
name = "openai/sim"
local = {{ latency = 0.6, solve_rate = 0.5, seed = 3, default_answer = "Let me see what is there first.\\n```bash\\nls /starter/data\\n```" }}
[[tasks]]
dataset = "starter-bash"
"""


async def main(target: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("chromium is missing: run scripts/ensure-chromium.sh")
    with tempfile.TemporaryDirectory(prefix="viewer-shot-") as tmp:
        root = Path(tmp)
        (root / "sweep.toml").write_text(SWEEP.format(out=root / "out"))
        subprocess.run([sys.executable, "-m", "orchestrator", "sweep", str(root / "sweep.toml"), "--quiet",
                        "--no-report"], cwd=ROOT, check=True, timeout=600)
        db = sqlite3.connect(root / "out" / "results.db")
        (episode,) = db.execute("SELECT id FROM episodes WHERE n_turns >= 2 ORDER BY success DESC, id LIMIT 1").fetchone()
        async with serving([Source.open(0, root / "out")], "127.0.0.1", 0) as base, \
                Browser.launch(chromium, root / "profile") as browser:
            await browser.window(1280, 1060)
            await browser.open(f"{base}/s/0/episodes/{episode}")
            top = await browser.evaluate("document.querySelector('h2').getBoundingClientRect().top + scrollY - 8")
            await browser.screenshot(target, int(top), 1060)
    print(f"wrote {target} (episode {episode}): look at it")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "viewer-episode.png"))
