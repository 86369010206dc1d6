"""`python3 -B icdriver.pyz` serves on stdin and stdout; `... snapshot` runs once at image build;
`... prepare` is our layer's build step over an image of yours (icdriver/prepare.py)."""

from __future__ import annotations

import sys

from icdriver.prepare import prepare
from icdriver.restore import snapshot
from icdriver.server import serve


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["snapshot"]:
        snapshot()
    elif argv == ["prepare"]:
        prepare()
    else:
        serve()


if __name__ == "__main__":
    main()
