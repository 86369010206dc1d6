"""The driver's protocol, declared once for both ends: its version, its ops, and the frame codec.

Every message is a frame: a 4-byte big-endian length, then a UTF-8 JSON object. Requests carry an
"id" and an "op"; every reply echoes the id and says "ok" (or, when the op failed, carries "error").
The driver's first frame, unasked, is the hello (id 0): pid, version, roots. The host refuses a
driver whose version is not VERSION: bump it on any change that one end must know about.

Ops and their fields:
  hello                      -> pid, version
  exec     argv cwd timeout cap flood env linger
                             -> exit, output, omitted, timed_out, flooded, elapsed, spawned, utf8
                                (linger: seconds to go on reading after argv exited, until its
                                output's pipe closes; 0, the default, reads what is buffered)
  session  cmd timeout cap   -> same as exec, plus cwd and restarted (one persistent bash)
  reset                      -> killed, restored, removed (processes and files back to pristine;
                                the processes that ran before the driver started are kept)
  python   codes timeout cap name fresh close
                             -> results (output, error, raised, omitted, timed_out, died, elapsed
                                per code), restarted (one persistent interpreter per name)
  put      dest tar          -> files (a base64 tar unpacked under dest, made first; members that
                                would land outside dest are refused)
  exit                       (no reply: the driver ends)

The interpreter behind `python` speaks the same frames over pipes: code fresh cap -> one result.
Standard library only, and nothing slow to import: this runs in every container at start.
"""

from __future__ import annotations

import json
import struct

VERSION = 3

HELLO, EXEC, SESSION, RESET, PYTHON, PUT, EXIT = "hello", "exec", "session", "reset", "python", "put", "exit"
# The envelope of every message, and the hello's fields.
ID, OP, OK, ERROR = "id", "op", "ok", "error"
PID, VERSION_KEY, ROOTS = "pid", "version", "roots"

HEADER = struct.Struct(">I")


def framed(body: bytes) -> bytes:
    """`body` as one frame: its length, then itself (the host's LLM workers frame pickles so)."""
    return HEADER.pack(len(body)) + body


def encode(message: dict) -> bytes:
    """One frame: the length, then the JSON."""
    return framed(json.dumps(message).encode("utf-8"))


def decode(buf: bytearray) -> dict | None:
    """Take the first frame off the front of `buf`; None while `buf` holds no whole frame yet."""
    if len(buf) < HEADER.size:
        return None
    (size,) = HEADER.unpack_from(buf)
    if len(buf) < HEADER.size + size:
        return None
    body = bytes(buf[HEADER.size:HEADER.size + size])
    del buf[:HEADER.size + size]
    return json.loads(body.decode("utf-8"))


def read(stream) -> dict | None:
    """One frame from a blocking binary stream; None at its end."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    return json.loads(stream.read(size).decode("utf-8"))


def write(stream, message: dict) -> None:
    """One frame to a blocking binary stream, flushed."""
    stream.write(encode(message))
    stream.flush()
