"""Files handed to the container by the host: a tar, unpacked where the host says (the op `put`).

Harbor's verifier needs its tests copied in only after the agent is done, and an oracle its
solution; both arrive this way, over the driver's stream, without a `docker cp` per episode.
"""

from __future__ import annotations

import base64
import io
import os
import tarfile


def unpack(dest: str, data: str) -> int:
    """Unpack the base64 tar `data` under the directory `dest` (made if missing); the number of
    members. A member whose path would leave `dest` (absolute, `..`, a link out) is refused."""
    os.makedirs(dest, exist_ok=True)
    top = os.path.realpath(dest)
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(data)), mode="r:") as tar:
        members = tar.getmembers()
        for member in members:
            target = os.path.realpath(os.path.join(top, member.name))
            if os.path.commonpath([top, target]) != top or member.islnk() or member.isdev():
                raise ValueError("refused tar member %r: it would not stay under %s" % (member.name, dest))
            if member.issym() and os.path.isabs(member.linkname):
                raise ValueError("refused tar member %r: an absolute link" % member.name)
        for member in members:
            tar.extract(member, top, set_attrs=True)
    return len(members)
