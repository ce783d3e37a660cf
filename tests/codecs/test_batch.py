import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.errors import CodecError, MessageDecodeError
from trocket.codecs.message import (
    BATCH_HEADER_SIZE,
    Message,
    MessageEncodeError,
    batch_message_size,
    decode_batch,
    encode_batch,
    encode_batch_message,
    iter_batch_entries,
)

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    min_size=1,
    max_size=10,
)
messages = st.builds(
    lambda body, flag, props: Message("", body, flag, props),
    st.binary(max_size=64),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(_text, _text, max_size=4),
)


def test_known_bytes():
    # MessageDecoder.encodeMessage: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN,
    # body, PROPLEN (i16), properties without a trailing \x02.
    msg = Message("T", b"hi", 7, {"WAIT": "true"})
    expected = (
        bytes.fromhex(
            "00000021"  # TOTALSIZE 33 = 22 + 2 + 9
            "00000000"  # MAGICCODE
            "00000000"  # BODYCRC
            "00000007"  # FLAG
            "00000002"
            "6869"  # BODYLEN, "hi"
            "0009"  # PROPLEN
        )
        + b"WAIT\x01true"
    )
    assert encode_batch_message(msg) == expected
    assert batch_message_size(2, 9) == 33 == BATCH_HEADER_SIZE + 11
    assert encode_batch([msg, msg]) == expected * 2
    assert decode_batch(expected * 2, topic="T") == [msg, msg]


def test_cpp_style_entry_with_trailing_separator_decodes():
    props = b"UNIQ_KEY\x01AB\x02WAIT\x01true\x02"
    entry = (
        struct.pack(">iiiii", 22 + 1 + len(props), 0, 0, 0, 1)
        + b"x"
        + struct.pack(">h", len(props))
        + props
    )
    (msg,) = decode_batch(entry)
    assert msg.properties == {"UNIQ_KEY": "AB", "WAIT": "true"}


def test_entries_are_views():
    data = encode_batch([Message("", b"abc", 1, {"K": "v"}), Message("", b"", 2, {})])
    first, second = iter_batch_entries(data)
    assert (first.offset, first.flag, bytes(first.body), bytes(first.properties)) == (
        0,
        1,
        b"abc",
        b"K\x01v",
    )
    assert isinstance(first.body, memoryview)
    assert (second.offset, second.total_size, second.flag) == (first.total_size, 22, 2)


def test_total_size_check_can_be_relaxed():
    data = bytearray(encode_batch_message(Message("", b"abc", 0, {})))
    data[0:4] = struct.pack(">i", 999)
    with pytest.raises(MessageDecodeError, match="TOTALSIZE"):
        decode_batch(bytes(data))
    assert decode_batch(bytes(data), check_total_size=False)[0].body == b"abc"


def test_every_truncation_is_a_decode_error():
    data = encode_batch([Message("", b"body", 3, {"A": "1"})])
    for cut in range(1, len(data)):
        with pytest.raises(MessageDecodeError):
            decode_batch(data[:cut])
    assert decode_batch(b"") == []


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00",  # negative body length
        struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\xff\xff",  # negative properties length
        struct.pack(">iiiii", 22, 0, 0, 0, 2**31 - 1) + b"\x00\x00",  # oversized body
        struct.pack(">iiiii", 24, 0, 0, 0, 0) + b"\x00\x02\xff\xfe",  # properties not UTF-8
    ],
)
def test_malformed(data):
    with pytest.raises(MessageDecodeError):
        decode_batch(data)


def test_encode_errors():
    with pytest.raises(MessageEncodeError):
        encode_batch_message(Message("", b"", 2**31, {}))
    with pytest.raises(MessageEncodeError):
        encode_batch_message(Message("", b"", 0, {"K": "v" * 40000}))


@settings(max_examples=100)
@given(st.lists(messages, max_size=5), st.booleans())
def test_round_trip(msgs, java_order):
    data = encode_batch(msgs, java_order=java_order)
    assert decode_batch(data) == msgs
    assert decode_batch(memoryview(bytearray(data))) == msgs


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_garbage_only_raises_decode_errors(data):
    try:
        decode_batch(data)
        decode_batch(data, check_total_size=False)
    except CodecError as exc:
        assert isinstance(exc, MessageDecodeError)
