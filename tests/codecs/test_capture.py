"""The native capture format: round trips, incremental reading, damage."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, strategies as st

from trocket.codecs.capture import (
    FILE_HEADER,
    CaptureFormatError,
    CaptureReader,
    CaptureRecord,
    Direction,
    Role,
    TruncatedCaptureError,
    decode_record,
    encode_record,
    iter_records,
    read_records,
)
from trocket.codecs.errors import CodecError


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _rec(i: int = 0, payload: bytes = b"\x00\x00\x00\x00") -> CaptureRecord:
    return CaptureRecord(
        1_700_000_000_000_000_000 + i, 7, "127.0.0.1:40000", "127.0.0.1:9876",
        Direction.SENT if i % 2 else Direction.RECEIVED, _frame(payload), Role.CLIENT,
    )


def test_header_and_record_layout():
    assert FILE_HEADER == b"TRKCAP\r\n\x00\x01\x00\x10\x00\x00\x00\x00"
    data = encode_record(_rec(1, b"\x00\x00\x00\x00"))
    length = struct.unpack_from(">I", data)[0]
    assert length == len(data) - 4
    assert data[4:8] == b"\x01\x02\x00\x00"  # sent, client, no flags
    assert struct.unpack_from(">QQ", data, 8) == (1_700_000_000_000_000_001, 7)
    assert data.endswith(b"\x00\x00\x00\x04\x00\x00\x00\x00")
    rec, end = decode_record(data)
    assert rec == _rec(1) and end == len(data) and rec.payload == b"\x00\x00\x00\x00"


addresses = st.text(max_size=40)
records = st.builds(
    CaptureRecord,
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    addresses,
    addresses,
    st.sampled_from(list(Direction)),
    st.binary(min_size=4, max_size=200).map(_frame),
    st.sampled_from(list(Role)),
    st.integers(0, 0xFFFF),
)


@given(st.lists(records, max_size=8), st.integers(1, 64))
def test_round_trip_in_any_chunking(recs, chunk):
    data = FILE_HEADER + b"".join(encode_record(r) for r in recs)
    assert read_records(data) == recs
    reader = CaptureReader()
    out = []
    for i in range(0, len(data), chunk):
        reader.feed(data[i : i + chunk])
        out.extend(reader)
    reader.close()
    assert out == recs
    assert list(iter_records(io.BytesIO(data), chunk_size=chunk)) == recs


def test_truncated_tail_is_reported_or_tolerated():
    data = FILE_HEADER + encode_record(_rec(0)) + encode_record(_rec(1))[:-3]
    with pytest.raises(TruncatedCaptureError):
        read_records(data)
    assert read_records(data, allow_truncated=True) == [_rec(0)]
    assert list(iter_records(io.BytesIO(data), allow_truncated=True)) == [_rec(0)]


@pytest.mark.parametrize(
    "data,match",
    [
        (b"NOTACAP!" + FILE_HEADER[8:], "not a trocket capture"),
        (FILE_HEADER[:8] + b"\x00\x09" + FILE_HEADER[10:], "unsupported capture version"),
        (FILE_HEADER + b"\xff\xff\xff\xff" + b"\x00" * 40, "impossible record length"),
        (FILE_HEADER + b"\x00\x00\x00\x02ab", "impossible record length"),
    ],
)
def test_damage_is_a_codec_error(data, match):
    with pytest.raises(CaptureFormatError, match=match):
        read_records(data)
    assert issubclass(CaptureFormatError, CodecError)


def test_frame_length_must_match_the_record():
    data = bytearray(encode_record(_rec(0, b"abcdef")))
    data[-10:-6] = b"\x00\x00\x00\x09"  # the frame's own length prefix lies
    with pytest.raises(CaptureFormatError, match="frame says"):
        decode_record(bytes(data))
