"""Who the driver starts a process as (icdriver/users.py): Docker's user forms, looked up as
`docker exec -u` looks them up; root means no change of user; a name the container lacks is one
line. The driver's run as that user, in a container, is tests/docker/test_harbor.py's image-user."""

from __future__ import annotations

import pwd

import pytest

from icdriver import users


def test_root_in_every_form_and_an_image_without_user_change_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(users, "USER_FILE", str(tmp_path / "user"))  # no file: an image built before its USER was kept
    assert all(users.resolve(spec) is None for spec in (None, "", "root", "0", "0:0", "root:root", users.IMAGE))
    (tmp_path / "user").write_text("\n")  # an image that sets no USER
    assert users.resolve(users.IMAGE) is None


def test_a_name_its_uid_and_a_group_resolve_as_docker_resolves_them(tmp_path, monkeypatch):
    nobody = pwd.getpwnam("nobody")
    got = users.resolve("nobody")
    assert got is not None and (got.uid, got.gid, got.home, got.name) == (nobody.pw_uid, nobody.pw_gid,
                                                                          nobody.pw_dir, "nobody")
    assert users.resolve(str(nobody.pw_uid)) == got
    assert users.resolve("nobody:0") == got._replace(gid=0)
    unknown = users.resolve("4321:77")  # a UID /etc/passwd lacks: as Docker, that UID, with HOME /
    assert unknown is not None and (unknown.uid, unknown.gid, unknown.groups, unknown.home) == (4321, 77, [], "/")
    monkeypatch.setattr(users, "USER_FILE", str(tmp_path / "user"))
    (tmp_path / "user").write_text("nobody\n")
    assert users.resolve(users.IMAGE) == got
    assert users.popen_args(got) == {"user": got.uid, "group": got.gid, "extra_groups": got.groups}
    assert users.environment(got, {"HOME": "/root", "A": "1"}) == {"HOME": nobody.pw_dir, "A": "1"}
    assert users.popen_args(None) == {} and users.environment(None, {"HOME": "/root"}) == {"HOME": "/root"}


def test_a_user_the_container_lacks_is_one_line():
    with pytest.raises(ValueError, match="no user 'no-such-user-here' in the container's /etc/passwd"):
        users.resolve("no-such-user-here")
    with pytest.raises(ValueError, match="no group 'no-such-group-here'"):
        users.resolve("nobody:no-such-group-here")
