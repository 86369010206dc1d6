"""Who a process runs as: a user in Docker's forms (`name`, `uid`, `name:group`, `uid:gid`), looked
up in the container's own /etc/passwd and /etc/group as `docker exec -u` looks it up; or IMAGE,
the image's own USER, which our layer recorded when it was built (USER_FILE: images/own/Dockerfile).

The driver runs as root (it restores files and kills what an episode left); the agent's actions, a
Harbor task's solution and its verifier run as the task's user, as Harbor and Docker run them.
"""

from __future__ import annotations

import grp
import pwd
from typing import NamedTuple, Optional

IMAGE = "image"  # the image's USER
USER_FILE = "/usr/lib/intercode/user"  # the image's USER as its Dockerfile set it ("" when it set none)


class User(NamedTuple):
    uid: int
    gid: int
    groups: list[int]  # supplementary groups
    home: str
    name: str


def image_user() -> str:
    """The image's USER as recorded at build time; "" (root) when it set none or nothing was recorded."""
    try:
        with open(USER_FILE) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def resolve(spec: Optional[str]) -> Optional[User]:
    """The user `spec` names, or None for root (no change of user). ValueError, in one line, for a
    name the container does not know."""
    if spec == IMAGE:
        spec = image_user()
    if not spec or spec in ("root", "0", "0:0", "root:root"):
        return None
    name, _, group = spec.partition(":")
    entry = _passwd(name)
    if entry is not None:
        uid, gid, home, login = entry.pw_uid, entry.pw_gid, entry.pw_dir or "/", entry.pw_name
    elif name.isdigit():
        uid, gid, home, login = int(name), 0, "/", name
    else:
        raise ValueError("no user %r in the container's /etc/passwd" % name)
    if group:
        gid = _group(group)
    groups = sorted({g.gr_gid for g in _all_groups() if login in g.gr_mem} - {gid}) if entry is not None else []
    if uid == 0 and gid == 0:
        return None
    return User(uid, gid, groups, home, login)


def popen_args(user: Optional[User]) -> dict[str, object]:
    """subprocess.Popen's arguments that start a process as `user` (none for root)."""
    if user is None:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": user.groups}


def environment(user: Optional[User], env: dict[str, str]) -> dict[str, str]:
    """`env` with the user's HOME, as `docker exec -u` sets it."""
    return env if user is None else dict(env, HOME=user.home)


def _passwd(name: str) -> Optional[pwd.struct_passwd]:
    try:
        return pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        return None


def _group(group: str) -> int:
    try:
        return grp.getgrgid(int(group)).gr_gid if group.isdigit() else grp.getgrnam(group).gr_gid
    except KeyError:
        if group.isdigit():
            return int(group)
        raise ValueError("no group %r in the container's /etc/group" % group) from None


def _all_groups() -> list[grp.struct_group]:
    try:
        return grp.getgrall()
    except OSError:
        return []
