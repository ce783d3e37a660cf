"""The tap's batch path: ``record_batch`` writes what one ``record`` per frame writes,
byte for byte, and a connection records a read's frames and the answers sent while
handling them together, in order."""

from __future__ import annotations

import os
import struct

import pytest
import trio

from trocket.codecs.capture import FILE_HEADER, Direction, Role, encode_record, iter_records
from trocket.codecs.command import RemotingCommand
from trocket.codecs.serialize import decode_command, encode_command
from trocket.remoting import FileTap, MemoryTap
from trocket.remoting.tap import PAYLOAD, rotated_paths

from .conftest import client_of, request, serving
from .test_tap_file import _stuck_disk

SYNC_ECHO = 110


def _frame(body: bytes, code: int = 10) -> bytes:
    return encode_command(RemotingCommand.request(code, body=body))


def _items(n: int, *, offset: int = 0) -> list:
    """n request/answer pairs as a reader hands them over: received payloads, sent frames."""
    items: list = []
    for i in range(offset, offset + n):
        items += (Direction.RECEIVED | PAYLOAD, _frame(b"req %d" % i)[4:], Direction.SENT, _frame(b"ans %d" % i))
    return items


def _one_by_one(tap, ts, conn, local, remote, role, items) -> None:
    """What record_batch must equal: one record() per frame, the length put back on
    payloads; ``ts`` is the received frames' timestamp, the sent ones' is ``ts + 1000``."""
    for kind, data in zip(items[::2], items[1::2]):
        frame = struct.pack(">I", len(data)) + bytes(data) if kind & PAYLOAD else data
        tap.record(ts + 1000 if kind & 1 else ts, conn, local, remote, kind & 1, role, frame)


def _file_bytes(path) -> bytes:
    return b"".join(open(p, "rb").read() for p in rotated_paths(path))


CALLS = [
    (1, 7, "127.0.0.1:10911", "127.0.0.1:50000", Role.SERVER, _items(3)),
    (2, 7, "127.0.0.1:10911", "127.0.0.1:50000", Role.SERVER, _items(1, offset=3)),
    (3, 8, "[::1]:10911", "é:4", Role.CLIENT, [Direction.SENT, _frame(b"only sent")]),
    (4, 7, "127.0.0.1:10911", "127.0.0.1:50001", Role.SERVER, _items(2, offset=9)),  # same conn, new address
    (5, 7, "127.0.0.1:10911", "127.0.0.1:50001", Role.SERVER, []),
    (6, 9, "a:1", "b:2", Role.UNKNOWN, [Direction.RECEIVED, _frame(b"whole frame received")]),
]


def _write_both(tmp_path, name: str) -> tuple[bytes, bytes]:
    one, batch = tmp_path / f"{name}-one.trkcap", tmp_path / f"{name}-batch.trkcap"
    with FileTap(one) as a, FileTap(batch) as b:
        for ts, conn, local, remote, role, items in CALLS:
            _one_by_one(a, ts, conn, local, remote, role, items)
            b.record_batch(ts, ts + 1000, conn, local, remote, role, items)
    assert a.written == b.written == b.records == sum(len(c[-1]) // 2 for c in CALLS)
    return _file_bytes(one), _file_bytes(batch)


def test_record_batch_writes_what_record_writes_byte_for_byte(tmp_path):
    one, batch = _write_both(tmp_path, "plain")  # no trio loop: handed over at once
    assert one == batch and len(one) > len(FILE_HEADER)


async def test_record_batch_from_a_loop_writes_what_record_writes(tmp_path):
    one, batch = _write_both(tmp_path, "loop")
    assert one == batch
    records = list(iter_records(open(tmp_path / "loop-batch.trkcap", "rb")))
    assert [decode_command(r.payload).body for r in records[:4]] == [b"req 0", b"ans 0", b"req 1", b"ans 1"]
    assert [r.direction for r in records[:2]] == [Direction.RECEIVED, Direction.SENT]


def test_memory_tap_record_batch_equals_record():
    a, b = MemoryTap(), MemoryTap()
    for ts, conn, local, remote, role, items in CALLS:
        _one_by_one(a, ts, conn, local, remote, role, items)
        b.record_batch(ts, ts + 1000, conn, local, remote, role, items)
    assert a.records == b.records and len(b.records) == 14


def test_record_batch_copies_data_the_caller_reuses(tmp_path):
    path = tmp_path / "reuse.trkcap"
    buf = bytearray(_frame(b"first")[4:])
    items = [Direction.RECEIVED | PAYLOAD, buf, Direction.SENT, memoryview(_frame(b"second"))]
    with FileTap(path) as tap:
        tap.record_batch(1, 2, 1, "a:1", "b:2", 1, items)
        buf[-5:] = b"XXXXX"
    assert [decode_command(r.payload).body for r in iter_records(open(path, "rb"))] == [b"first", b"second"]


async def test_a_stuck_disk_drops_and_counts_batched_frames_without_blocking(tmp_path):
    _stuck_disk(tmp_path, flush_bytes=1000, batch=True)


async def test_rotation_cuts_batches_between_records(tmp_path):
    path = tmp_path / "rot.trkcap"
    with FileTap(path, rotate_bytes=2000, flush_bytes=64 * 1024) as tap:
        for i in range(10):
            tap.record_batch(i, i, 1, "a:1", "b:2", 1, _items(4, offset=4 * i))
    paths = rotated_paths(path)
    assert len(paths) >= 5
    bodies = []
    for p in paths:
        assert os.path.getsize(p) <= 2000
        bodies += [decode_command(r.payload).body for r in iter_records(open(p, "rb"))]
    assert bodies == [b"%s %d" % (w, i) for i in range(40) for w in (b"req", b"ans")]


# -- a live connection ----------------------------------------------------------------------


class _Calls(MemoryTap):
    """A MemoryTap that also notes how it was called (per-frame or batch, and how many)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def record(self, *args, **kw) -> None:
        if not getattr(self, "_in_batch", False):
            self.calls.append(("record", 1))
        super().record(*args, **kw)

    def record_batch(self, received_ns, sent_ns, connection_id, local_address, remote_address, role, items) -> None:
        self.calls.append(("batch", len(items) // 2))
        self._in_batch = True
        try:
            super().record_batch(received_ns, sent_ns, connection_id, local_address, remote_address, role, items)
        finally:
            self._in_batch = False


def _sync_echo(conn, req: RemotingCommand) -> RemotingCommand:
    return RemotingCommand.response(0, body=req.body)


def _check_order(records) -> None:
    """Every answer comes after its request, requests in the order they were sent."""
    seen: set[int] = set()
    for r in records:
        cmd = decode_command(r.payload)
        if r.direction is Direction.RECEIVED:
            assert not cmd.is_response
            seen.add(cmd.opaque)
        else:
            assert cmd.is_response and cmd.opaque in seen, "an answer recorded before its request"


@pytest.mark.parametrize("inline", [True, False], ids=["inline-sync", "async"])
async def test_a_connection_records_requests_before_their_answers(inline):
    stap = _Calls()
    async with serving(tap=stap) as server, client_of() as client:
        if inline:
            server.register_processor(SYNC_ECHO, _sync_echo, inline=True)
        code = SYNC_ECHO if inline else 100

        async def call(i: int) -> None:
            r = await client.invoke_sync(server.address, request(code, body=b"%d" % i))
            assert r.body == b"%d" % i

        for _ in range(3):  # concurrent callers: the client writes several requests at once
            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(call, i)
    records = stap.records
    assert len(records) == 120
    _check_order(records)
    received = [decode_command(r.payload).body for r in records if r.direction is Direction.RECEIVED]
    assert sorted(received) == sorted(b"%d" % i for i in range(20) for _ in range(3))
    batches = [n for kind, n in stap.calls if kind == "batch"]
    assert sum(n for _, n in stap.calls) == 120
    if inline:
        # the answers went out with their requests: one call records both, and more than one pair
        assert not [c for c in stap.calls if c[0] == "record"]
        assert max(batches) >= 4
        # a call's received frames share the read's timestamp, its sent ones the call's
        assert len({r.timestamp_ns for r in records if r.direction is Direction.RECEIVED}) <= len(batches)
        assert len({r.timestamp_ns for r in records if r.direction is Direction.SENT}) <= len(batches)
        asked = {decode_command(r.payload).opaque: r.timestamp_ns for r in records if r.direction is Direction.RECEIVED}
        for r in records:
            if r.direction is Direction.SENT:  # an answer is stamped no earlier than its request
                assert r.timestamp_ns >= asked[decode_command(r.payload).opaque]
    else:
        # an async handler answers after the reader moved on: its answers record one by one
        assert len([c for c in stap.calls if c[0] == "record"]) == 60


async def test_a_connection_tapped_through_a_file_matches_its_memory_records(tmp_path):
    """The live batch path through FileTap writes what MemoryTap holds, byte for byte."""
    path = tmp_path / "live.trkcap"

    class Both:
        def __init__(self) -> None:
            self.file, self.memory = FileTap(path), MemoryTap()

        def record(self, *args, **kw) -> None:
            self.file.record(*args, **kw)
            self.memory.record(*args, **kw)

        def record_batch(self, *args) -> None:
            self.file.record_batch(*args)
            self.memory.record_batch(*args)

        def flush(self) -> None:
            self.file.flush()

    tap = Both()
    async with serving(tap=tap) as server, client_of() as client:
        server.register_processor(SYNC_ECHO, _sync_echo, inline=True)
        async with trio.open_nursery() as nursery:
            for i in range(30):
                nursery.start_soon(client.invoke_sync, server.address, request(SYNC_ECHO, body=b"x" * i))
    tap.file.close()
    assert len(tap.memory.records) == 60
    assert open(path, "rb").read() == FILE_HEADER + b"".join(encode_record(r) for r in tap.memory.records)


async def test_a_stretch_that_sends_more_than_a_batch_holds_records_in_order():
    """An inline processor sending many frames: the batch is recorded as it fills
    (bounded), and every frame still comes after the request that caused it."""
    stap = _Calls()

    def chatty(conn, req: RemotingCommand):
        for i in range(700):  # oneway notes to the client: more than a batch holds
            note = RemotingCommand.request(4242, body=b"note %d" % i)
            note.mark_oneway()
            assert conn.send_frame_nowait(encode_command(note))
        return RemotingCommand.response(0, body=req.body)

    async with serving(tap=stap) as server, client_of() as client:
        server.register_processor(SYNC_ECHO + 1, chatty, inline=True)
        r = await client.invoke_sync(server.address, request(SYNC_ECHO + 1, body=b"go"))
        assert r.body == b"go"
    records = stap.records
    assert len(records) == 702
    assert records[0].direction is Direction.RECEIVED and decode_command(records[0].payload).body == b"go"
    bodies = [decode_command(r.payload).body for r in records[1:]]
    assert bodies == [b"note %d" % i for i in range(700)] + [b"go"]
    batches = [n for kind, n in stap.calls if kind == "batch"]
    assert len(batches) >= 2 and max(batches) <= 512 and sum(batches) == 702


def test_an_endpoint_refuses_a_sink_without_record_batch():
    """A record-only sink fails when the server is made, with the way out in the error,
    not on its first connection; subclassing RecordEachFrame is that way out."""
    from trocket.remoting import RemotingServer, ServerConfig
    from trocket.remoting.tap import RecordEachFrame

    class RecordOnly:
        def __init__(self) -> None:
            self.frames: list[bytes] = []

        def record(self, ts, conn, local, remote, direction, role, frame, flags=0) -> None:
            self.frames.append(frame)

        def flush(self) -> None:
            pass

    with pytest.raises(TypeError, match="record_batch.*RecordEachFrame"):
        RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0), tap=RecordOnly())

    class Adapted(RecordEachFrame, RecordOnly):
        pass

    sink = Adapted()
    RemotingServer(ServerConfig(listen_host="127.0.0.1", listen_port=0), tap=sink)
    sink.record_batch(1, 2, 7, "a:1", "b:2", 0, [0 | PAYLOAD, b"xyz", 1, b"\x00\x00\x00\x01q"])
    assert sink.frames == [b"\x00\x00\x00\x03xyz", b"\x00\x00\x00\x01q"]
