"""codecs.capture.encode_record_batch: the records of one record per frame, byte for byte,
on both paths (the pure reference and the compiled twin), the twin handing what it does
not take to the reference."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs import accel, capture
from trocket.codecs.capture import (
    BATCH_PAYLOAD,
    connection_head,
    decode_record,
    encode_record_fields,
)

PATHS = ["pure"] + (["accel"] if accel.ACTIVE else [])


def _fn(path: str):
    if path == "pure":
        return accel.pure("encode_record_batch")
    from trocket.codecs import _accel

    return _accel.encode_record_batch


def _expected(conn, local, remote, ts, role, items, sent_ts=None) -> bytes:
    out = []
    for kind, data in zip(items[::2], items[1::2]):
        frame = struct.pack(">I", len(data)) + bytes(data) if kind & BATCH_PAYLOAD else bytes(data)
        stamp = (ts if sent_ts is None else sent_ts) if kind & 1 else ts
        out.append(encode_record_fields(stamp, conn, local, remote, kind & 1, role, frame))
    return b"".join(out)


ITEMS = [
    2, b"\x00\x00\x00\x05{}abc",  # a payload: the record gets its length field back
    1, b"\x00\x00\x00\x02{}",  # a whole frame
    3, b"",  # an (impossible but encodable) empty payload, sent
    0, b"\x00\x00\x00\x00",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "conn, local, remote, ts, role",
    [
        (7, "127.0.0.1:10911", "127.0.0.1:54321", 1_700_000_000_123_456_789, 1),
        (2**64 - 1, "", "[::1]:1", 0, 0),
        (1, "é:1", "b" * 300, 2**63 + 5, 255),  # a timestamp past the twin's range: the reference
    ],
)
def test_a_batch_is_the_records_of_each_frame(path, conn, local, remote, ts, role):
    _, tail = connection_head(conn, local, remote)
    out: list = []
    total = _fn(path)(tail, ts, ts, role, ITEMS, out)
    blob = b"".join(out)
    assert blob == _expected(conn, local, remote, ts, role, ITEMS)
    assert total == len(blob) and len(out) == len(ITEMS)
    assert out[1::2][0] is ITEMS[1] and out[3] is ITEMS[3]  # frames kept by reference, not copied
    record, end = decode_record(blob)
    assert (record.connection_id, record.local_address, record.remote_address) == (conn, local, remote)
    assert record.frame == b"\x00\x00\x00\x09\x00\x00\x00\x05{}abc" and record.timestamp_ns == ts


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "items",
    [
        [0, bytearray(b"\x00\x00\x00\x00")],  # not bytes: copied by the reference
        [1, memoryview(b"\x00\x00\x00\x01x"), 2, b"ab"],
        [5, b"\x00\x00\x00\x00"],  # other kind bits: ignored (direction 1, a whole frame)
        [],
    ],
)
def test_what_the_twin_hands_over_comes_out_the_same(path, items):
    _, tail = connection_head(3, "a:1", "b:2")
    out: list = []
    total = _fn(path)(tail, 42, 43, 2, items, out)
    assert b"".join(out) == _expected(3, "a:1", "b:2", 42, 2, items, 43) and total == len(b"".join(out))
    assert all(type(part) is bytes for part in out)


def _outcome(fn, *args):
    out: list = []
    try:
        return ("ok", fn(*args, out), b"".join(out))
    except Exception as exc:
        return ("error", type(exc), str(exc), out)


@pytest.mark.parametrize("path", PATHS)
def test_bad_input_comes_out_as_the_references(path):
    """Errors (the reference's own, nothing appended by the twin first) and odd input."""
    _, tail = connection_head(3, "a:1", "b:2")
    cases = [
        (tail, -1, 1, 1, [0, b"x"]),  # a negative timestamp
        (tail, 1, -1, 1, [1, b"x"]),
        (tail, 1, 1, 256, [1, b"x"]),  # a role past a byte
        (tail, 1, 1, 1, [1, b"x", "1", b"y"]),  # a kind that is no number
        (tail, 1, 1, 1, [1, b"x", 1, "text"]),  # data that is no bytes
        (tail, 1, 1, 1, [1, b"x", 1]),  # an odd item left over: ignored
        (bytearray(tail), 1, 1, 1, [1, b"x"]),
    ]
    for args in cases:
        ref = _outcome(accel.pure("encode_record_batch"), *args)
        assert _outcome(_fn(path), *args) == ref, args
    assert _outcome(_fn(path), *cases[0])[0] == "error"


def test_the_public_name_is_the_active_path():
    expected = _fn("accel") if accel.ACTIVE else accel.pure("encode_record_batch")
    assert capture.encode_record_batch is expected


def _batch_args(odd: bool):
    """Arguments as a connection passes them (the twin's own path), or, with ``odd``,
    each one now and then what only the reference takes, or refuses."""

    def field(common, other):
        return st.one_of(common, common, common, other) if odd else common

    tail = field(
        st.builds(lambda conn, local, remote: connection_head(conn, local, remote)[1],
                  st.integers(0, 2**64 - 1), st.text(max_size=30), st.text(max_size=30)),
        st.binary(max_size=40) | st.binary(max_size=40).map(bytearray) | st.none(),
    )
    stamp = field(
        st.integers(0, 2**63 - 1),
        st.integers(-(2**65), -1) | st.integers(2**63, 2**65) | st.booleans() | st.floats(allow_nan=False),
    )
    role = field(st.integers(0, 255), st.integers(256, 2**70) | st.integers(-(2**70), -1) | st.booleans() | st.text(max_size=2))
    kind = field(st.integers(0, 3), st.integers(-(2**70), 2**70) | st.booleans() | st.text(max_size=2) | st.none())
    data = field(
        st.binary(max_size=64),
        st.binary(max_size=64).map(bytearray) | st.binary(max_size=64).map(memoryview) | st.integers(0, 8)
        | st.text(max_size=4) | st.none(),
    )
    items = st.tuples(
        st.lists(st.tuples(kind, data), max_size=6).map(lambda pairs: [x for pair in pairs for x in pair]),
        st.lists(kind, max_size=1 if odd else 0),  # now and then an odd item left over
    ).map(lambda t: t[0] + t[1])
    return st.tuples(tail, stamp, stamp, role, items)


@pytest.mark.skipif(not accel.ACTIVE, reason=f"accelerator off: {accel.REASON}")
@given(st.booleans().flatmap(_batch_args))
def test_record_batch_differential(args):
    """The same records, total and parts (heads, and the frames by reference), or the same
    error with what was appended before it, from encode_record_batch's pure reference and
    its compiled twin."""
    assert _outcome(_fn("accel"), *args) == _outcome(accel.pure("encode_record_batch"), *args)
