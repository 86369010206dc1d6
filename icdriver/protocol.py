"""The driver's protocol, declared once for both ends: its version, its ops, and the frame codec.

Every message is a frame: a 4-byte big-endian length, then a UTF-8 JSON object. Requests carry an
"id" and an "op"; every reply echoes the id and says "ok" (or, when the op failed, carries "error").
The driver's first frame, unasked, is the hello (id 0): pid, version, roots. The host refuses a
driver whose version is not VERSION: bump it on any change that one end must know about.

Ops and their fields (each op's request and reply is a TypedDict below, used by both ends):
  hello                      -> pid, version
  exec     argv cwd timeout cap flood env linger user
                             -> exit, output, omitted, timed_out, flooded, elapsed, spawned, utf8
                                (linger: seconds to go on reading after argv exited, until its
                                output's pipe closes; 0, the default, reads what is buffered;
                                utf8 only when spawned)
  session  cmd timeout cap flood shell user
                             -> exit, output, omitted, timed_out, flooded, elapsed, cwd, restarted
                                (one persistent bash; shell only when it starts it)
                                (user: who runs it, Docker's forms or "image", the image's USER;
                                root by default: icdriver/users.py)
  reset                      -> killed, restored, removed (processes and files back to pristine;
                                the processes that ran before the driver started are kept)
  python   codes timeout cap name fresh close
                             -> results (output, error, raised, omitted, timed_out, died, elapsed
                                per code), restarted (one persistent interpreter per name)
  put      dest tar          -> files (a base64 tar unpacked under dest, made first; members that
                                would land outside dest are refused)
  exit                       (no reply: the driver ends)

The interpreter behind `python` speaks the same frames over pipes: code fresh cap -> one result.
Standard library only, and nothing slow to import: this runs in every container at start, on
Python 3.9 or later (icdriver/prepare.py). The annotations are strings, never evaluated there; the
TypedDicts' class statements are, and those work from 3.8 on.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Final, Literal, TypedDict, Union

if TYPE_CHECKING:
    from typing import NotRequired  # Python 3.11's: only in annotations, which are strings here

VERSION = 4

HELLO: Final = "hello"
EXEC: Final = "exec"
SESSION: Final = "session"
RESET: Final = "reset"
PYTHON: Final = "python"
PUT: Final = "put"
EXIT: Final = "exit"
# The envelope of every message, and the hello's fields.
ID: Final = "id"
OP: Final = "op"
OK: Final = "ok"
ERROR: Final = "error"
PID: Final = "pid"
VERSION_KEY: Final = "version"
ROOTS: Final = "roots"

HEADER = struct.Struct(">I")

Frame = dict[str, Any]  # any frame as it comes off the wire: a JSON object, of whichever message


# ----------------------------------------------------------------------------- requests


class _Request(TypedDict, total=False):
    id: int  # numbered by the host's client as it sends; the reply echoes it


class HelloRequest(_Request):
    op: Literal["hello"]


class ExecRequest(_Request):
    op: Literal["exec"]
    argv: list[str]
    cwd: NotRequired[str]  # "/" by default
    timeout: NotRequired[float]  # seconds; 10 by default
    cap: NotRequired[int]  # bytes of output kept; 65536 by default
    flood: NotRequired[int]  # bytes left out past which the process is killed; 8 MiB by default
    env: NotRequired[dict[str, str]]  # over the driver's own environment
    linger: NotRequired[float]  # seconds; 0 by default
    user: NotRequired[str]  # who runs it (Docker's forms, or "image": the image's USER); root by default


class SessionRequest(_Request):
    op: Literal["session"]
    cmd: str
    timeout: NotRequired[float]
    cap: NotRequired[int]
    flood: NotRequired[int]
    shell: NotRequired[str]  # the bash to start, when none is running; the image's by default
    user: NotRequired[str]  # who the bash runs as (as exec's); another user's bash is ended first


class ResetRequest(_Request):
    op: Literal["reset"]


class PythonRequest(_Request):
    op: Literal["python"]
    codes: list[str]
    timeout: NotRequired[float]  # per code
    cap: NotRequired[int]  # characters kept of each of stdout and stderr
    name: NotRequired[str]  # the interpreter; "main" by default
    fresh: NotRequired[bool]  # empty its namespace first
    close: NotRequired[bool]  # stop it afterwards


class PutRequest(_Request):
    op: Literal["put"]
    dest: str
    tar: str  # an uncompressed tar, base64


class ExitRequest(_Request):
    op: Literal["exit"]


Request = Union[HelloRequest, ExecRequest, SessionRequest, ResetRequest, PythonRequest, PutRequest, ExitRequest]


# ----------------------------------------------------------------------------- replies


class Reply(TypedDict, total=False):
    """The envelope of every reply, which the driver's loop puts around what the op returned."""

    id: int | None  # the request's (None if it had none); the hello's is 0
    ok: bool
    error: str  # why the op failed: then ok is false and the op's own fields are missing


class HelloReply(Reply):
    pid: int
    version: int
    roots: NotRequired[list[str]]  # in the hello sent unasked: the top-level paths the reset restores


class OutputReply(Reply):
    """What exec and session both answer: how the action ended, and what it printed."""

    exit: int
    output: str  # stdout and stderr merged, capped
    omitted: int  # bytes beyond the cap
    timed_out: bool
    flooded: bool
    elapsed: float


class ExecReply(OutputReply):
    spawned: bool  # false: argv could not be started (exit 127 or 126)
    utf8: NotRequired[bool]  # whether the output was valid UTF-8; only when spawned


class SessionReply(OutputReply):
    cwd: str | None  # the shell's directory afterwards; None when the shell was lost
    restarted: bool  # the shell was lost since the last call: this one is a new shell


class ResetReply(Reply):
    killed: int
    restored: int
    removed: int


class CodeReply(TypedDict):
    """What the interpreter answers for one code (icdriver/repl.py)."""

    output: str
    error: str
    raised: bool
    omitted: int
    timed_out: bool
    died: bool


class CodeResult(CodeReply):
    """One code's result in python's reply: the interpreter's answer, timed by the driver."""

    elapsed: float


class PythonReply(Reply):
    results: list[CodeResult]
    restarted: bool


class PutReply(Reply):
    files: int


class CodeRequest(TypedDict):
    """What the driver sends the interpreter behind `python`, per code."""

    code: str
    fresh: bool
    cap: int


# ----------------------------------------------------------------------------- the codec


def framed(body: bytes) -> bytes:
    """`body` as one frame: its length, then itself (the host's LLM workers frame pickles so)."""
    return HEADER.pack(len(body)) + body


def encode(message: Mapping[str, object]) -> bytes:
    """One frame: the length, then the JSON."""
    return framed(json.dumps(message).encode("utf-8"))


def decode(buf: bytearray) -> Frame | None:
    """Take the first frame off the front of `buf`; None while `buf` holds no whole frame yet."""
    if len(buf) < HEADER.size:
        return None
    (size,) = HEADER.unpack_from(buf)
    if len(buf) < HEADER.size + size:
        return None
    body = bytes(buf[HEADER.size:HEADER.size + size])
    del buf[:HEADER.size + size]
    return _loads(body)


def read(stream: IO[bytes]) -> Frame | None:
    """One frame from a blocking binary stream; None at its end."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    return _loads(stream.read(size))


def write(stream: IO[bytes], message: Mapping[str, object]) -> None:
    """One frame to a blocking binary stream, flushed."""
    stream.write(encode(message))
    stream.flush()


def _loads(body: bytes) -> Frame:
    frame: Frame = json.loads(body.decode("utf-8"))  # every message is a JSON object
    return frame
