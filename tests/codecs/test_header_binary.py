import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.errors import HeaderDecodeError, HeaderEncodeError
from trocket.codecs.header_binary import decode_binary_header, encode_binary_header


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
