"""`python3 -B icdriver.pyz` serves on stdin and stdout; `... snapshot` runs once at image build."""

import sys

from icdriver.restore import snapshot
from icdriver.server import serve


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["snapshot"]:
        snapshot()
    else:
        serve()


if __name__ == "__main__":
    main()
