import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs import accel
from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.errors import HeaderDecodeError, HeaderEncodeError
from trocket.codecs.header_binary import decode_binary_header, encode_binary_header

from .strategies import text


def enc(cmd):
    return encode_binary_header(cmd, cmd.ext_fields)


def test_layout():
    cmd = RemotingCommand(code=310, language=LanguageCode.CPP, version=409, opaque=1000, flag=2,
                          remark="r\u00e9", ext_fields={"k": "v1"})
    raw = enc(cmd)
    assert raw == (
        struct.pack(">hBhiii", 310, 1, 409, 1000, 2, 3) + "r\u00e9".encode()
        + struct.pack(">i", 2 + 1 + 4 + 2) + b"\x00\x01k" + b"\x00\x00\x00\x02v1"
    )


def test_absent_and_empty():
    # null and empty remark/ext both write length 0 and read back as absent, as in Java
    for remark, ext in [(None, None), ("", {})]:
        back = decode_binary_header(enc(RemotingCommand(code=1, remark=remark, ext_fields=ext)))
        assert back.remark is None and back.ext_fields is None
    back = decode_binary_header(enc(RemotingCommand(code=1, ext_fields={"k": ""})))
    assert back.ext_fields == {"k": ""}
    assert back.serialize_type is SerializeType.ROCKETMQ


@pytest.mark.parametrize("code", [32768, -32769, 70000])
def test_codes_beyond_a_short_are_refused(code):
    with pytest.raises(HeaderEncodeError, match="signed short"):
        enc(RemotingCommand(code=code))


def test_negative_code_survives():
    assert decode_binary_header(enc(RemotingCommand(code=-5))).code == -5


def test_every_truncation_is_a_typed_error():
    raw = enc(RemotingCommand(code=1, remark="remark", ext_fields={"key": "value", "k2": "v2"}))
    for cut in range(len(raw)):
        with pytest.raises(HeaderDecodeError):
            decode_binary_header(raw[:cut])


def test_unknown_language_byte():
    raw = bytearray(enc(RemotingCommand(code=1)))
    raw[2] = 200
    with pytest.raises(HeaderDecodeError, match="unknown language"):
        decode_binary_header(bytes(raw))


def test_bad_utf8():
    raw = struct.pack(">hBhiii", 1, 0, 0, 0, 0, 1) + b"\xff" + struct.pack(">i", 0)
    with pytest.raises(HeaderDecodeError, match="UTF-8"):
        decode_binary_header(raw)


def test_negative_lengths():
    raw = struct.pack(">hBhiii", 1, 0, 0, 0, 0, -1) + struct.pack(">i", 0)
    with pytest.raises(HeaderDecodeError):
        decode_binary_header(raw)
    raw = struct.pack(">hBhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", -4)
    with pytest.raises(HeaderDecodeError):
        decode_binary_header(raw)


@given(st.binary(max_size=80))
def test_garbage_raises_only_header_errors(raw):
    try:
        decode_binary_header(raw)
    except HeaderDecodeError:
        pass


# -- the shape cache: a block laid out like the last one of its length takes one struct call

# These test the pure reference's cache (the compiled twin, when built, has none and is
# compared with the reference in test_accel.py).
pure_decode = accel.pure("decode_binary_header")



def reference_ext(block: bytes) -> dict[str, str]:
    """An independent, obviously-correct reading of an ext block (the oracle)."""
    ext, pos = {}, 0
    while pos < len(block):
        if pos + 2 > len(block):
            raise HeaderDecodeError("cut in a key length")
        klen = int.from_bytes(block[pos : pos + 2], "big")
        key, pos = block[pos + 2 : pos + 2 + klen], pos + 2 + klen
        if pos + 4 > len(block):
            raise HeaderDecodeError("key overruns")
        vlen = int.from_bytes(block[pos : pos + 4], "big", signed=True)
        if vlen < 0 or pos + 4 + vlen > len(block):
            raise HeaderDecodeError("value overruns")
        value, pos = block[pos + 4 : pos + 4 + vlen], pos + 4 + vlen
        try:
            ext[key.decode()] = value.decode()
        except UnicodeDecodeError as exc:
            raise HeaderDecodeError(str(exc)) from None
    return ext


def with_ext_block(block: bytes) -> bytes:
    """A header with no remark and ``block`` as its ext fields."""
    return struct.pack(">hBhiii", 310, 0, 0, 1, 0, 0) + struct.pack(">i", len(block)) + block


def learned(header: bytes):
    """Decode ``header`` until its ext block's shape is the cached one; the command.

    (Another layout of the same length may be cached by an earlier test: it takes
    more misses to replace.)"""
    from trocket.codecs import header_binary

    block_len = struct.unpack_from(">i", header, 17)[0]
    for _ in range(header_binary._LEARN_AFTER + header_binary._RELEARN_AFTER):
        cmd = pure_decode(header)
        shape = header_binary._SHAPES.get(block_len)
        if shape and shape.keys == tuple(cmd.ext_fields) and shape.vlens == tuple(
            len(v.encode()) for v in cmd.ext_fields.values()
        ):
            return cmd
    raise AssertionError("the shape was never cached")


def ext_of(header: bytes):
    try:
        return pure_decode(header).ext_fields
    except HeaderDecodeError:
        return HeaderDecodeError


def oracle(block: bytes):
    try:
        return reference_ext(block) or None
    except HeaderDecodeError:
        return HeaderDecodeError


SEND_EXT = {"a": "group", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "g": "1700000000123",
            "i": "KEYS\x01k\x02UNIQ_KEY\x017F000001", "n": "broker-a", "\u00e9t\u00e9": "\u00fcber"}


def test_a_repeated_shape_decodes_like_the_first_time():
    raw = enc(RemotingCommand(code=310, ext_fields=SEND_EXT, serialize_type=SerializeType.ROCKETMQ))
    first = learned(raw)
    for _ in range(3):  # the cached shape serves these
        again = pure_decode(raw)
        assert again == first and list(again.ext_fields) == list(SEND_EXT)
    # same lengths, other bytes: values are read from this header, not the cache
    other = dict(SEND_EXT, b="TopicTust", g="1700000000999")
    assert pure_decode(enc(RemotingCommand(code=310, ext_fields=other))).ext_fields == other


def test_cached_shape_with_bad_utf8_value_or_key_is_a_typed_error():
    block = b"\x00\x01k" + b"\x00\x00\x00\x02ab" + b"\x00\x02k2" + b"\x00\x00\x00\x01v"
    assert learned(with_ext_block(block)).ext_fields == {"k": "ab", "k2": "v"}
    bad_value = block.replace(b"ab", b"a\xff")
    bad_key = block.replace(b"k2", b"k\xfe")
    for bad in (bad_value, bad_key):
        with pytest.raises(HeaderDecodeError, match="UTF-8"):
            pure_decode(with_ext_block(bad))
    assert pure_decode(with_ext_block(block)).ext_fields == {"k": "ab", "k2": "v"}


def test_same_total_length_other_layout():
    # Both blocks are 18 bytes long; the second must not be read with the first's shape.
    one = b"\x00\x01a" + b"\x00\x00\x00\x03xyz" + b"\x00\x01b" + b"\x00\x00\x00\x00"
    two = b"\x00\x01a" + b"\x00\x00\x00\x00" + b"\x00\x01b" + b"\x00\x00\x00\x03xyz"
    assert len(one) == len(two)
    assert learned(with_ext_block(one)).ext_fields == {"a": "xyz", "b": ""}
    assert pure_decode(with_ext_block(two)).ext_fields == {"a": "", "b": "xyz"}
    assert pure_decode(with_ext_block(one)).ext_fields == {"a": "xyz", "b": ""}


def test_cached_shape_duplicate_keys_keep_first_position_last_value():
    block = b"\x00\x01a\x00\x00\x00\x011" + b"\x00\x01b\x00\x00\x00\x012" + b"\x00\x01a\x00\x00\x00\x013"
    for _ in range(4):  # learned at the second
        ext = pure_decode(with_ext_block(block)).ext_fields
        assert list(ext.items()) == [("a", "3"), ("b", "2")]


def test_truncated_entry_inside_a_block_of_a_cached_length():
    good = b"\x00\x01a\x00\x00\x00\x02xy" + b"\x00\x01b\x00\x00\x00\x01z"
    learned(with_ext_block(good))
    # same total length, but the second entry's value length now overruns the block
    cut = b"\x00\x01a\x00\x00\x00\x02xy" + b"\x00\x01b\x00\x00\x00\x02z"
    with pytest.raises(HeaderDecodeError, match="overruns"):
        pure_decode(with_ext_block(cut))
    # a negative value length, and a key length running past the end
    for bad in (b"\x00\x01a\xff\xff\xff\xf9xy" + b"\x00\x01b\x00\x00\x00\x01z",
                b"\x00\x01a\x00\x00\x00\x02xy" + b"\x00\x09b\x00\x00\x00\x01z"):
        with pytest.raises(HeaderDecodeError):
            pure_decode(with_ext_block(bad))


def test_shape_cache_is_bounded():
    from trocket.codecs import header_binary

    for n in range(header_binary._MAX_SHAPES + 10):
        assert learned(with_ext_block(b"\x00\x01k" + struct.pack(">i", n) + b"v" * n)).ext_fields == {"k": "v" * n}
    assert len(header_binary._SHAPES) <= header_binary._MAX_SHAPES


@given(st.dictionaries(text.map(lambda t: t[:4]), text.map(lambda t: t[:6]), min_size=1, max_size=5),
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4))
def test_mutations_of_a_cached_block_match_the_oracle(ext, edits):
    # learn the block's shape, then flip bytes: the result is the oracle's, fast path or not
    block = encode_binary_header(RemotingCommand(code=1), ext)[17 + 4 :]
    assert learned(with_ext_block(block)).ext_fields == oracle(block)
    mutated = bytearray(block)
    for at, byte in edits:
        mutated[at % len(mutated)] = byte
    assert ext_of(with_ext_block(bytes(mutated))) == oracle(bytes(mutated))


def test_uncached_loop_names_the_structural_fault_first():
    # value length 3 over a 2-byte tail that cuts "é" in half: an overrun, not bad UTF-8
    block = b"\x00\x01k\x00\x00\x00\x03" + "\u00e9".encode()[:1] + b"x"
    with pytest.raises(HeaderDecodeError, match="overruns"):
        pure_decode(with_ext_block(block[:-1] + b"\xc3"))
    # bad UTF-8 early, then a key length running past the end: the overrun is reported
    block = b"\x00\x01k\x00\x00\x00\x01\xff" + b"\x00\x09"
    with pytest.raises(HeaderDecodeError, match="overruns"):
        pure_decode(with_ext_block(block))
    # bad UTF-8 in a well-formed block
    with pytest.raises(HeaderDecodeError, match="UTF-8"):
        pure_decode(with_ext_block(b"\x00\x01k\x00\x00\x00\x01\xff"))
    # multi-byte keys and values read through the loop
    block = b"\x00\x02\xc3\xa9\x00\x00\x00\x03ab\x00" + b"\x00\x00\x00\x00\x00\x00"
    assert pure_decode(with_ext_block(block)).ext_fields == {"\u00e9": "ab\x00", "": ""}


def test_key_prefix_cache_writes_the_same_bytes_and_stays_bounded():
    from trocket.codecs import header_binary

    cmd = RemotingCommand(code=310, ext_fields={"k": "v1", "\u00e9": "", "k3": "\u00fc"})
    first = enc(cmd)
    assert enc(cmd) == first == (
        struct.pack(">hBhiii", 310, 0, 0, 0, 0, 0) + struct.pack(">i", 9 + 8 + 10)
        + b"\x00\x01k\x00\x00\x00\x02v1" + b"\x00\x02\xc3\xa9\x00\x00\x00\x00" + b"\x00\x02k3\x00\x00\x00\x02\xc3\xbc"
    )
    for n in range(header_binary._MAX_KEY_PREFIXES + 10):
        enc(RemotingCommand(code=1, ext_fields={f"key{n}": "v"}))
    assert len(header_binary._KEY_PREFIXES) <= header_binary._MAX_KEY_PREFIXES
    for _ in range(2):  # a refused key is not remembered
        with pytest.raises(HeaderEncodeError, match="65535"):
            enc(RemotingCommand(code=1, ext_fields={"k" * 70000: "v"}))
