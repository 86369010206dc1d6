"""Pure functions and state rules, no engine needed."""

from __future__ import annotations

import pytest

from foundation.pool.container import (
    TRANSITIONS,
    ContainerState,
    IllegalTransition,
    PooledContainer,
)
from foundation.pool.ownership import Owner
from foundation.sandbox import simplify_path


@pytest.mark.parametrize(("current", "arg", "expected"), [
    ("/", "testbed", "/testbed"),
    ("/testbed", "..", "/"),
    ("/testbed", "../..", "/"),
    ("/testbed", "dir1/./subdir1", "/testbed/dir1/subdir1"),
    ("/testbed/dir1", "/tmp", "/tmp"),
    ("/testbed", "", "/testbed"),
    ("/a/b", "../c/", "/a/c"),
])
def test_cd_is_resolved_like_the_original(current, arg, expected):
    assert simplify_path(current, arg) == expected


class FakeRaw:
    id = "0123456789abcdef"


def test_only_declared_transitions_are_allowed():
    member = PooledContainer(None, "img", FakeRaw())  # type: ignore[arg-type]
    member.move_to(ContainerState.IDLE)
    member.move_to(ContainerState.LEASED)
    assert member.uses == 1
    with pytest.raises(IllegalTransition):
        member.move_to(ContainerState.IDLE)  # a used container must be reset first
    member.move_to(ContainerState.RESETTING)
    member.move_to(ContainerState.BROKEN, "test")
    assert member.broken_reason == "test"
    with pytest.raises(IllegalTransition):
        member.move_to(ContainerState.IDLE)
    assert all(ContainerState.BROKEN in TRANSITIONS[s] for s in ContainerState if s not in (ContainerState.BROKEN, ContainerState.REMOVED))


def test_owner_round_trips_and_knows_it_is_alive():
    me = Owner.me()
    assert Owner.parse(str(me)) == me
    assert me.is_alive()
    assert not Owner(me.host, me.boot_id, me.pid, "0").is_alive()
    assert not Owner(me.host, "another-boot", me.pid, me.start_time).is_alive()
    assert Owner("some-other-host", me.boot_id, 1, "0").is_alive(), "never reap what we can't check"
