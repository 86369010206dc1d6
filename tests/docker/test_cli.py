"""The command line: its help, and one clear line with a non-zero exit for every bad input."""

from __future__ import annotations

import pytest

from tests.unit.test_cli import assert_one_line_error, run


@pytest.mark.docker
def test_image_not_built_for_the_pool():
    assert_one_line_error(run("pool", "demo", "--image", "intercode/never-built", "--size", "1"), "images build")
