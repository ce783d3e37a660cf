import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import (
    CodecError,
    FrameError,
    FrameTooLargeError,
    NotRocketMQError,
    TruncatedFrameError,
)
from trocket.codecs.frame import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, split_frames


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


PAYLOADS = st.lists(st.binary(min_size=4, max_size=300), min_size=1, max_size=8)


@given(PAYLOADS, st.data())
def test_any_chunking_yields_the_same_frames(payloads, data):
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = FrameDecoder(sniff=False)
    out = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        decoder.feed(stream[prev:cut])
        prev = cut
        out.extend(decoder)
    assert out == payloads
    assert decoder.buffered == 0
    decoder.close()


def test_byte_at_a_time():
    payloads = [b"\x00\x00\x00\x00", b"\x01\x00\x00\x02ab" + b"x" * 100]
    stream = b"".join(frame(p) for p in payloads)
    decoder = FrameDecoder()
    out = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        out.extend(decoder)
    assert out == payloads


def test_default_max_is_16_mib():
    assert FrameDecoder().max_frame_length == DEFAULT_MAX_FRAME_LENGTH == 16 * 1024 * 1024


def test_oversized_length_is_rejected_before_buffering():
    decoder = FrameDecoder(max_frame_length=1024)
    decoder.feed(struct.pack(">i", 1025))
    with pytest.raises(FrameTooLargeError) as info:
        decoder.next_frame()
    assert info.value.length == 1025 and info.value.limit == 1024
    assert "1025" in str(info.value)
    # sticky: the stream cannot be resynchronised
    with pytest.raises(FrameTooLargeError):
        decoder.feed(b"more")


def test_frame_at_exact_limit_is_accepted():
    decoder = FrameDecoder(max_frame_length=8)
    decoder.feed(frame(b"12345678"))
    assert decoder.next_frame() == b"12345678"


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3])
def test_impossible_lengths(length):
    decoder = FrameDecoder(sniff=False)
    decoder.feed(struct.pack(">i", length))
    with pytest.raises(FrameError, match="impossible frame length"):
        decoder.next_frame()


@pytest.mark.parametrize(
    "prefix, protocol",
    [
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS"),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1"),
        (b"POST /send HTTP/1.1\r\n", "HTTP/1"),
    ],
)
def test_foreign_protocols_are_named(prefix, protocol):
    decoder = FrameDecoder()
    decoder.feed(prefix)
    with pytest.raises(NotRocketMQError) as info:
        decoder.next_frame()
    assert protocol in info.value.protocol
    assert "not RocketMQ" in str(info.value)


def test_tls_is_detected_from_two_bytes():
    decoder = FrameDecoder()
    decoder.feed(b"\x16\x03")
    with pytest.raises(NotRocketMQError):
        decoder.next_frame()


def test_sniffing_only_applies_to_the_stream_start():
    # A later frame whose payload looks like HTTP is still just bytes.
    decoder = FrameDecoder()
    decoder.feed(frame(b"\x00\x00\x00\x00") + frame(b"GET / HTTP/1.1"))
    assert list(decoder) == [b"\x00\x00\x00\x00", b"GET / HTTP/1.1"]


def test_close_mid_frame_raises_truncated():
    decoder = FrameDecoder()
    decoder.feed(frame(b"abcdefgh")[:-2])
    assert decoder.next_frame() is None
    with pytest.raises(TruncatedFrameError):
        decoder.close()


def test_split_frames():
    assert split_frames(frame(b"abcd") + frame(b"efgh")) == [b"abcd", b"efgh"]
    with pytest.raises(TruncatedFrameError):
        split_frames(frame(b"abcd")[:5])


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_garbage_only_raises_codec_errors(data):
    decoder = FrameDecoder(max_frame_length=4096)
    try:
        decoder.feed(data)
        list(decoder)
        decoder.close()
    except CodecError:
        pass
