"""FileTap: a writer thread, a bounded buffer that drops (and counts) rather than
blocks, rotation into FILE.1, FILE.2, ..., and ``trocket broker/namesrv --tap``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from trocket.codecs.capture import FILE_HEADER, Direction, iter_records
from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import decode_command
from trocket.remoting import FileTap
from trocket.remoting.tap import PAYLOAD, rotated_paths

from ..waiting import wait_until, wait_until_sync
from .conftest import client_of, request, serving


def _frame(body: bytes) -> bytes:
    from trocket.codecs.serialize import encode_command

    return encode_command(RemotingCommand.request(10, body=body))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path) -> list:
    with open(path, "rb") as f:
        return list(iter_records(f))


def test_records_reach_the_disk_within_the_flush_interval_without_close(tmp_path):
    path = tmp_path / "t.trkcap"
    tap = FileTap(path, flush_interval=0.05)
    try:
        tap.record(1, 7, "a:1", "b:2", Direction.RECEIVED, 1, _frame(b"hello"))
        wait_until_sync(lambda: tap.written >= 1, 5, what="the writer thread writes")
        (rec,) = _read(path)
        assert decode_command(rec.payload).body == b"hello"
        assert (rec.connection_id, rec.local_address, rec.remote_address) == (7, "a:1", "b:2")
    finally:
        tap.close()


class _StuckTap(FileTap):
    """A disk that does not answer until ``release`` is set."""

    release: threading.Event

    def _write(self, data, count):
        self.release.wait(10)
        super()._write(data, count)


def _stuck_disk(tmp_path, flush_bytes: int, batch: bool = False) -> None:
    """1000 records on a disk that does not answer: most dropped and counted, none waited
    for; ``batch``: in 100 ``record_batch`` calls, as a reader records them."""
    _StuckTap.release = threading.Event()
    frame = _frame(b"x" * 100)
    tap = _StuckTap(tmp_path / "slow.trkcap", max_buffer_bytes=10_000, flush_bytes=flush_bytes, flush_interval=0.01)
    try:
        t0 = time.monotonic()
        if batch:
            items = [Direction.RECEIVED | PAYLOAD, frame[4:], Direction.SENT, frame] * 5
            for i in range(100):
                tap.record_batch(i, i, 1, "a:1", "b:2", 1, items)
        else:
            for i in range(1000):
                tap.record(i, 1, "a:1", "b:2", Direction.RECEIVED, 1, frame)
        assert time.monotonic() - t0 < 1.0  # never waited for the disk
        assert tap.dropped > 800
        assert tap.records + tap.dropped == 1000
    finally:
        _StuckTap.release.set()
        tap.close()
    records = _read(tmp_path / "slow.trkcap")
    assert len(records) == tap.written == tap.records
    assert "dropped (buffer full" in tap.summary()
    # what was kept is whole and in order
    assert [r.timestamp_ns for r in records] == sorted(r.timestamp_ns for r in records)


def test_a_stuck_disk_drops_and_counts_frames_and_never_blocks_record(tmp_path):
    _stuck_disk(tmp_path, flush_bytes=1)


def test_rotation_continues_in_numbered_files_each_a_whole_capture(tmp_path):
    path = tmp_path / "rot.trkcap"
    frame = _frame(b"y" * 1000)
    with FileTap(path, rotate_bytes=5000, flush_bytes=1) as tap:
        for i in range(20):
            tap.record(i, 1, "a:1", "b:2", Direction.SENT, 1, frame)
    paths = rotated_paths(path)
    assert paths[0] == str(path) and paths[1] == f"{path}.1" and len(paths) >= 4
    stamps = []
    for p in paths:
        assert open(p, "rb").read(16) == FILE_HEADER
        assert os.path.getsize(p) <= 5000
        stamps += [r.timestamp_ns for r in _read(p)]
    assert stamps == list(range(20))
    assert "in %d files" % len(paths) in tap.summary()


def test_a_failed_write_is_counted_and_leaves_no_half_record(tmp_path, monkeypatch):
    path = tmp_path / "full.trkcap"
    tap = FileTap(path, flush_interval=10)
    real_write = os.write
    calls = {"n": 0}

    def half_then_fail(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("trocket.remoting.tap.os.write", half_then_fail)
    tap.record(1, 1, "a:1", "b:2", Direction.SENT, 1, _frame(b"lost"))
    tap.close()
    monkeypatch.undo()
    assert (tap.lost, tap.errors, tap.written) == (1, 1, 0)
    assert open(path, "rb").read() == FILE_HEADER
    assert "lost to 1 failed writes" in tap.summary()


async def test_file_tap_on_a_live_server_keeps_every_frame(tmp_path):
    path = tmp_path / "live.trkcap"
    with FileTap(path) as tap:
        async with serving(tap=tap) as server, client_of() as client:
            for i in range(50):
                await client.invoke_sync(server.address, request(body=b"%d" % i))
    records = _read(path)
    assert len(records) == 100 and tap.dropped == 0
    got = [decode_command(r.payload).body for r in records if r.direction is Direction.RECEIVED]
    assert got == [b"%d" % i for i in range(50)]


@pytest.mark.parametrize("command", ["namesrv", "broker"])
def test_cli_tap_records_and_reports_on_exit(tmp_path, command):
    port = free_port()
    path = tmp_path / "cli.trkcap"
    argv = [sys.executable, "-m", "trocket", command, "--listen", f"127.0.0.1:{port}", "--tap", str(path)]
    if command == "broker":
        argv += ["--namesrv-listen", f"127.0.0.1:{free_port()}", "--store", str(tmp_path / "store"),
                 "--segment-size", "32m"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        import socket

        def connected() -> socket.socket | None:
            assert proc.poll() is None, "the server exited"
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=1)
            except OSError:
                return None

        sock = wait_until_sync(connected, 30, interval=0.05, what="the server listens")
        from trocket.codecs.serialize import encode_command

        with sock:
            # GET_BROKER_CLUSTER_INFO (106) on the name server, GET_BROKER_RUNTIME_INFO (28) on the broker
            code = 106 if command == "namesrv" else 28
            sock.sendall(encode_command(RemotingCommand.request(code, opaque=5)))
            sock.settimeout(10)
            assert sock.recv(4)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err  # SIGTERM: 143 after the clean shutdown (trocket/interrupt.py)
    assert "Traceback" not in err
    assert f"trocket {command}: tap {path}:" in err and "frames written" in err
    records = [r for r in _read(path)]
    req = [decode_command(r.payload) for r in records if r.direction is Direction.RECEIVED]
    assert any(c.opaque == 5 and c.code == code for c in req)
    resp = [decode_command(r.payload) for r in records if r.direction is Direction.SENT]
    assert any(c.opaque == 5 and c.is_response for c in resp)


def test_cached_address_fields_follow_a_connection_whose_addresses_change(tmp_path):
    path = tmp_path / "addr.trkcap"
    with FileTap(path) as tap:
        tap.record(1, 5, "a:1", "b:2", Direction.SENT, 1, _frame(b"1"))
        tap.record(2, 5, "a:1", "b:2", Direction.SENT, 1, _frame(b"2"))
        tap.record(3, 5, "a:1", "c:3", Direction.SENT, 1, _frame(b"3"))
        tap.record(4, 6, "[::1]:1", "é:4", Direction.SENT, 2, _frame(b"4"))
    got = [(r.connection_id, r.local_address, r.remote_address) for r in _read(path)]
    assert got == [(5, "a:1", "b:2"), (5, "a:1", "b:2"), (5, "a:1", "c:3"), (6, "[::1]:1", "é:4")]


# -- recording from a trio loop: records gather in the loop, the writer gets chunks ----------


async def test_records_from_a_loop_reach_the_disk_within_the_flush_interval_without_flush(tmp_path):
    path = tmp_path / "loop.trkcap"
    tap = FileTap(path, flush_interval=0.05)
    try:
        tap.record(1, 7, "a:1", "b:2", Direction.RECEIVED, 1, _frame(b"quiet"))
        assert tap.written == 0  # held in the loop until the writer asks for it
        await wait_until(lambda: tap.written >= 1, 5)  # the writer asked the loop (run_sync_soon) for it
        (rec,) = _read(path)
        assert decode_command(rec.payload).body == b"quiet"
    finally:
        tap.close()


async def test_a_loop_hands_over_whole_chunks_in_order(tmp_path):
    path = tmp_path / "chunks.trkcap"
    frames = [_frame(b"%d" % i * 40) for i in range(500)]
    tap = FileTap(path, flush_bytes=4096, flush_interval=10)
    try:
        for i, frame in enumerate(frames):
            tap.record(i, 1 + i % 3, "a:1", f"b:{i % 3}", Direction.SENT, 1, frame)
        assert tap.records == 500
        await wait_until(lambda: tap.written >= 450, 5)  # every full chunk reaches the disk without flush()
        tap.flush()
        await wait_until(lambda: tap.written >= 500, 5)
    finally:
        tap.close()
    records = _read(path)
    assert [r.timestamp_ns for r in records] == list(range(500))
    assert [r.frame for r in records] == frames
    assert {(r.connection_id, r.remote_address) for r in records} == {(1, "b:0"), (2, "b:1"), (3, "b:2")}


async def test_rotation_cuts_a_loops_chunks_between_records(tmp_path):
    path = tmp_path / "rot.trkcap"
    frame = _frame(b"z" * 300)
    with FileTap(path, rotate_bytes=2000, flush_bytes=64 * 1024) as tap:
        for i in range(40):  # one chunk of 40 records, written across several files
            tap.record(i, 1, "a:1", "b:2", Direction.SENT, 1, frame)
    paths = rotated_paths(path)
    assert len(paths) >= 8
    stamps = []
    for p in paths:
        assert os.path.getsize(p) <= 2000
        stamps += [r.timestamp_ns for r in _read(p)]
    assert stamps == list(range(40)) and tap.written == 40


async def test_a_stuck_disk_drops_and_counts_a_loops_frames_and_never_blocks_record(tmp_path):
    _stuck_disk(tmp_path, flush_bytes=1000)  # from a trio loop: chunks of several records


async def test_a_frame_in_a_buffer_the_caller_reuses_is_recorded_as_it_was(tmp_path):
    path = tmp_path / "reuse.trkcap"
    buf = bytearray(_frame(b"first"))
    with FileTap(path) as tap:
        tap.record(1, 1, "a:1", "b:2", Direction.SENT, 1, _frame(b"warm"))  # the connection is cached
        tap.record(2, 1, "a:1", "b:2", Direction.SENT, 1, buf)
        buf[-5:] = b"XXXXX"
    assert [decode_command(r.payload).body for r in _read(path)] == [b"warm", b"first"]
