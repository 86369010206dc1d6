"""The in-container driver's parts on the host, without Docker: the frame codec, capturing output,
the snapshot and reset of files on a temporary tree, the zipapp the images get, the version check."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from foundation.pool.driver import stale_image, version_mismatch
from icdriver import protocol
from icdriver.capture import CappedText, Capture, pump
from icdriver.process import kill_group
from icdriver.restore import Restorer, snapshot
from orchestrator.images.build_context import collect, driver_zipapp, inputs_hash
from orchestrator.images.specs import DRIVER, get

# ----------------------------------------------------------------------------- frames


def test_a_frame_round_trips_and_waits_for_its_last_byte():
    message = {"id": 7, "op": "exec", "argv": ["printf", "é\n"], "env": {}}
    frame = protocol.encode(message)
    assert frame[:4] == len(frame[4:]).to_bytes(4, "big")
    buf = bytearray(frame[:-1])
    assert protocol.decode(buf) is None and len(buf) == len(frame) - 1  # nothing taken yet
    buf += frame[-1:] + protocol.encode({"id": 8})
    assert protocol.decode(buf) == message
    assert protocol.decode(buf) == {"id": 8}
    assert protocol.decode(buf) is None and not buf


def test_frames_on_a_stream_end_with_none():
    stream = io.BytesIO()
    protocol.write(stream, {"id": 1, "ok": True})
    protocol.write(stream, {"id": 2, "ok": False, "error": "KeyError: 'x'"})
    stream.seek(0)
    assert protocol.read(stream) == {"id": 1, "ok": True}
    assert protocol.read(stream) == {"id": 2, "ok": False, "error": "KeyError: 'x'"}
    assert protocol.read(stream) is None


# ----------------------------------------------------------------------------- capture


def test_capture_keeps_the_cap_and_counts_the_rest():
    capture = Capture(cap=5, flood=10)
    capture.add(b"abc")
    capture.add(b"defgh")
    assert (bytes(capture.buf), capture.omitted, capture.flooded) == (b"abcde", 3, False)
    assert capture.text() == "abcde\n[output truncated: 3 bytes omitted]"
    capture.add(b"x" * 8)
    assert capture.flooded  # 11 omitted > 10


def test_capture_tells_broken_utf8_from_a_character_cut_by_the_cap():
    whole = Capture(cap=100, flood=100)
    whole.add("é".encode())
    assert whole.valid_utf8() and whole.text() == "é"
    broken = Capture(cap=100, flood=100)
    broken.add(b"\xff ok")
    assert not broken.valid_utf8() and broken.text() == "\ufffd ok"
    cut = Capture(cap=1, flood=100)  # keeps the first byte of "é" only
    cut.add("é".encode())
    assert cut.valid_utf8()


def test_capped_text_keeps_characters_strips_and_refuses_bytes():
    text = CappedText(4)
    assert text.write("  ab") == 4 and text.write("cdef") == 4
    assert (text.omitted, text.text()) == (4, "ab\n[output truncated: 4 characters omitted]")
    with pytest.raises(TypeError):
        text.write(b"bytes")
    assert CappedText(10).text() == ""


def _pumped(argv: list[str], timeout: float, cap: int = 1 << 16, flood: int = 1 << 20,
            linger: float = 0.0) -> tuple[str, bytes, float]:
    start = time.monotonic()  # before the spawn: the child's own sleeps start after it, however loaded the machine
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    capture = Capture(cap, flood)
    try:
        assert proc.stdout is not None
        outcome = pump(proc.stdout.fileno(), proc, start + timeout, capture, linger=linger)
        return outcome, bytes(capture.buf), time.monotonic() - start
    finally:
        kill_group(proc.pid, proc)
        proc.wait()
        proc.stdout.close()


def test_pump_reads_a_pipe_to_the_exit_timeout_or_flood():
    assert _pumped(["sh", "-c", "printf one; printf two"], 5)[:2] == ("exit", b"onetwo")
    outcome, _, seconds = _pumped(["sleep", "30"], 0.2)
    assert outcome == "timeout" and seconds < 20
    assert _pumped(["head", "-c", "100000", "/dev/zero"], 5, cap=10, flood=1000)[0] == "flood"


def test_pump_does_not_wait_for_a_background_child_holding_the_pipe():
    outcome, output, seconds = _pumped(["sh", "-c", "sleep 30 & echo started"], 60)
    assert (outcome, output) == ("exit", b"started\n") and seconds < 20


def test_pump_lingers_after_the_exit_until_the_pipe_closes_or_the_linger_ends():
    # the pipe closes when the background job ends: its line counts, and no more is waited
    outcome, output, seconds = _pumped(["sh", "-c", "(sleep 0.3; echo late) & echo now"], 60, linger=30)
    assert (outcome, output) == ("exit", b"now\nlate\n") and 0.3 <= seconds < 20
    # a job holding the pipe longer: what it printed within the linger counts, then the call ends
    # (it prints at once: on a loaded machine a job that first slept 0.2 s missed a 0.6 s linger)
    outcome, output, seconds = _pumped(["sh", "-c", "echo now; (echo soon; sleep 60) &"], 60, linger=3)
    assert (outcome, sorted(output.splitlines())) == ("exit", [b"now", b"soon"]) and 3 <= seconds < 20
    # the deadline holds while lingering
    outcome, _, seconds = _pumped(["sh", "-c", "sleep 60 & echo now"], 0.4, linger=30)
    assert outcome == "timeout" and 0.4 <= seconds < 20


def test_pump_stops_at_a_marker():
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"output\nMARK 0 /\n")
        capture = Capture(1 << 16, 1 << 20)
        assert pump(read_end, None, time.monotonic() + 5, capture, stop_at=b"\nMARK ") == "exit"
        assert capture.buf.startswith(b"output\nMARK ")
    finally:
        os.close(read_end)
        os.close(write_end)


# ----------------------------------------------------------------------------- restore

SECOND = 1_600_000_000 * 10**9  # whole seconds: an mtime survives the archive's decimal text exactly


def _make_tree(top: Path) -> None:
    (top / "data" / "sub").mkdir(parents=True)
    (top / "data" / "deep" / "er").mkdir(parents=True)
    (top / "data" / "a.txt").write_text("alpha\n")
    (top / "data" / "run.sh").write_text("#!/bin/sh\n")
    (top / "data" / "run.sh").chmod(0o755)
    (top / "data" / "sub" / "c.txt").write_text("gamma\n")
    (top / "data" / "deep" / "er" / "d.txt").write_text("delta\n")
    (top / "data" / "link").symlink_to("a.txt")
    os.link(top / "data" / "a.txt", top / "data" / "hard")
    (top / "other").mkdir()
    (top / "other" / "e.txt").write_text("epsilon\n")
    (top / "etc").mkdir()  # a system name: never archived, never restored
    (top / "etc" / "conf").write_text("system\n")
    for path in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [top]:
        os.utime(path, ns=(SECOND, SECOND), follow_symlinks=False)


def _fingerprint(top: Path) -> dict[str, tuple[object, ...]]:
    """Every path under top but the system's: type, mode, owner, mtime and content."""
    found: dict[str, tuple[object, ...]] = {"": (os.lstat(top).st_mtime_ns,)}
    for path in top.rglob("*"):
        if path.relative_to(top).parts[0] == "etc":
            continue
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            content: object = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            content = None
        found[str(path.relative_to(top))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
                                              st.st_gid, st.st_mtime_ns, content)
    return found


def _dirty(top: Path) -> None:
    """An episode's worth of changes: contents, modes, deletions, additions, renames, new top-level paths."""
    (top / "data" / "a.txt").write_text("changed\n")
    (top / "data" / "run.sh").chmod(0o600)
    (top / "data" / "sub" / "c.txt").unlink()
    (top / "data" / "sub" / "new.txt").write_text("new\n")
    subprocess.run(["rm", "-rf", str(top / "data" / "deep")], check=True)
    (top / "data" / "link").unlink()
    (top / "data" / "link").symlink_to("/elsewhere")
    (top / "data" / "hard").unlink()
    (top / "data" / "sub").rename(top / "data" / "moved")
    locked = top / "data" / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("f\n")
    (locked / "inner").chmod(0)
    locked.chmod(0)
    subprocess.run(["rm", "-rf", str(top / "other")], check=True)
    (top / "junk").mkdir()
    (top / "junk" / "x").write_text("x\n")
    (top / "junkfile").write_text("y\n")
    (top / "etc" / "added").write_text("left alone\n")


def test_a_reset_brings_a_dirtied_tree_back_to_its_snapshot(tmp_path: Path):
    top, meta = tmp_path / "top", tmp_path / "meta"
    top.mkdir()
    _make_tree(top)
    state, pristine = str(meta / "pristine.json"), str(meta / "pristine.tar")
    snapshot(str(top), config=str(meta / "reset.json"), state=state, pristine=pristine)
    files = Restorer(str(top), state=state, pristine=pristine)
    assert files.roots == [str(top / "data"), str(top / "other")]
    before = _fingerprint(top)
    _dirty(top)
    assert _fingerprint(top) != before
    try:
        restored, removed = files.restore()
        assert restored > 0 and removed > 0
        assert _fingerprint(top) == before
        assert (top / "etc" / "added").read_text() == "left alone\n"
        assert files.restore() == (0, 0)  # nothing changed since
    finally:
        if files.pristine is not None:  # the driver keeps the archive open for its life
            files.pristine.tar.close()


def test_a_tree_without_a_snapshot_has_nothing_to_restore(tmp_path: Path):
    files = Restorer(str(tmp_path), state=str(tmp_path / "missing.json"), pristine=str(tmp_path / "missing.tar"))
    assert (files.roots, files.restore()) == ([], (0, 0))


# ----------------------------------------------------------------------------- the zipapp and the version


def test_the_zipapp_is_the_same_bytes_every_time_and_holds_only_sources():
    data = driver_zipapp(DRIVER)
    assert data == driver_zipapp(DRIVER)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert names == sorted(names) and "__main__.py" in names and "icdriver/protocol.py" in names
    assert all(name.endswith(".py") and "__pycache__" not in name for name in names)
    spec = get("python")
    hashes = {inputs_hash(collect(spec, Path("/nonexistent")), spec.buildargs, "parent") for _ in range(2)}
    assert len(hashes) == 1


def test_the_zipapp_serves_and_says_its_version(tmp_path: Path):
    pyz = tmp_path / "icdriver.pyz"
    pyz.write_bytes(driver_zipapp(DRIVER))
    proc = subprocess.Popen([sys.executable, "-B", str(pyz)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = protocol.read(proc.stdout)
        assert hello is not None and version_mismatch(hello) is None and hello[protocol.PID] == proc.pid
        protocol.write(proc.stdin, {protocol.ID: 1, protocol.OP: protocol.EXEC, "argv": ["echo", "hi"]})
        reply = protocol.read(proc.stdout)
        assert reply is not None and (reply["id"], reply["ok"], reply["exit"], reply["output"]) == (1, True, 0, "hi\n")
        protocol.write(proc.stdin, {protocol.ID: 2, protocol.OP: protocol.EXIT})
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_a_driver_of_another_version_names_its_image_and_the_rebuild():
    hello = {protocol.ID: 0, protocol.OK: True, protocol.PID: 9, protocol.VERSION_KEY: protocol.VERSION + 1}
    mismatch = version_mismatch(hello)
    assert mismatch is not None and version_mismatch({**hello, protocol.VERSION_KEY: protocol.VERSION}) is None
    line = stale_image("intercode/python:latest", mismatch)
    assert "intercode/python:latest" in line and "`./dev images`" in line and "\n" not in line


# ----------------------------------------------------------------------------- files handed in


def _tar(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return out.getvalue()


def test_put_unpacks_under_its_destination_and_refuses_what_would_leave_it(tmp_path: Path):
    import base64

    from icdriver.files import unpack

    dest = tmp_path / "tests"
    count = unpack(str(dest), base64.b64encode(_tar({"test.sh": b"echo ok\n", "data/x.txt": b"x"})).decode())
    assert count == 2 and (dest / "data" / "x.txt").read_bytes() == b"x"
    assert os.access(dest / "test.sh", os.X_OK)  # modes kept: a script stays runnable
    for bad in (_tar({"../escape.txt": b"no"}), _tar({"/abs.txt": b"no"}), _tar({}, {"link": "/etc/passwd"})):
        with pytest.raises(ValueError, match="refused"):
            unpack(str(tmp_path / "other"), base64.b64encode(bad).decode())
    assert not (tmp_path / "escape.txt").exists()
