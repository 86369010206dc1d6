"""Date a file system's files as if its set-up had run now, at the image's build.

The original's images ran their set-up scripts at build, so a file's age (`find -mmin`, `-mtime`,
`-atime`) counted from the build. Our file systems come as tarballs made once, whose files carry
the moment the tarball was made. Each entry dated within a day of the tarball's newest one (what
the set-up made "now", or "a day ago") moves forward by the time since then; the dates the set-up
gave explicitly (`touch -t 2023...`) stay. Usage: redate.py TARBALL... (already extracted at /).
"""

import os
import sys
import tarfile
import time

WINDOW_NS = 86400 * 10**9  # a day: "now" and "yesterday" of the set-up scripts


def path_of(name):
    """The absolute path of a member name ("./testbed/a", "testbed/a/", ...)."""
    if name.startswith("./"):
        name = name[2:]
    name = name.strip("/")
    return "/" if name in ("", ".") else "/" + name


def redate(tarballs):
    names = []
    for tarball in tarballs:
        if os.path.exists(tarball):  # file system 4 has none: the shell left its pattern as it was
            with tarfile.open(tarball) as archive:
                names += [path_of(member.name) for member in archive.getmembers()]
    stats = {name: os.lstat(name) for name in set(names) if os.path.lexists(name)}
    if not stats:
        return 0
    newest = max(st.st_mtime_ns for st in stats.values())
    shift = time.time_ns() - newest
    moved = 0
    for name, st in stats.items():
        if st.st_mtime_ns >= newest - WINDOW_NS:
            os.utime(name, ns=(st.st_atime_ns + shift, st.st_mtime_ns + shift), follow_symlinks=False)
            moved += 1
    return moved


if __name__ == "__main__":
    print("redated %d entries" % redate(sys.argv[1:]))
