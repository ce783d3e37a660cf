import json
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.command import RPC_ONEWAY, RPC_RESPONSE, LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.send_response import SendResponseCommand
from trocket.codecs.errors import CodecError, HeaderDecodeError
from trocket.codecs.frame import split_frames
from trocket.codecs.serialize import decode_command, encode_command

from .strategies import commands

GOLDEN = Path(__file__).parents[2] / "conformance" / "golden" / "java-4.9.8"


def roundtrip(cmd):
    [payload] = split_frames(encode_command(cmd))
    return decode_command(payload)


def normalized(cmd):
    """What a command decodes back to: binary loses the empty/absent distinction."""
    if cmd.serialize_type is SerializeType.ROCKETMQ:
        remark = cmd.remark or None
        ext = cmd.ext_fields or None
    else:
        remark, ext = cmd.remark, cmd.ext_fields
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, remark, ext, cmd.body, cmd.serialize_type)


@settings(max_examples=300)
@given(commands())
def test_encode_decode_round_trip(cmd):
    back = roundtrip(cmd)
    assert normalized(back) == normalized(cmd)


@settings(max_examples=300)
@given(commands())
def test_decode_then_encode_gives_the_same_bytes(cmd):
    raw = encode_command(cmd)
    [payload] = split_frames(raw)
    assert encode_command(decode_command(payload)) == raw


def golden_entries():
    return json.loads((GOLDEN / "manifest.json").read_text())["frames"]


@pytest.mark.parametrize("entry", golden_entries(), ids=lambda e: e["file"])
def test_java_golden_frames(entry):
    raw = (GOLDEN / entry["file"]).read_bytes()
    [payload] = split_frames(raw)
    cmd = decode_command(payload)
    assert cmd.serialize_type.name == entry["serializeType"]
    assert (cmd.code, cmd.language.name, cmd.version, cmd.opaque, cmd.flag) == (
        entry["code"], entry["language"], entry["version"], entry["opaque"], entry["flag"])
    assert cmd.remark == entry["remark"]
    assert cmd.ext_fields == entry["extFields"]
    assert list(cmd.ext_fields or ()) == list(entry["extFields"] or ())
    assert cmd.body.hex() == entry["bodyHex"]
    assert encode_command(cmd) == raw


def test_serializer_switching_keeps_content():
    src = (GOLDEN / "send_message_v2__JSON.bin").read_bytes()
    cmd = decode_command(split_frames(src)[0])
    cmd.serialize_type = SerializeType.ROCKETMQ
    assert encode_command(cmd) == (GOLDEN / "send_message_v2__ROCKETMQ.bin").read_bytes()


def test_protocol_word_carries_type_and_header_length():
    raw = encode_command(RemotingCommand(code=1, serialize_type=SerializeType.ROCKETMQ, body=b"xyz"))
    total, word = struct.unpack_from(">iI", raw)
    assert total == len(raw) - 4
    assert word >> 24 == 1
    assert raw.endswith(b"xyz") and len(raw) == 8 + (word & 0xFFFFFF) + 3


def test_flags_and_builders():
    req = RemotingCommand.request(100, body=b"x", oneway=True, serialize_type=SerializeType.ROCKETMQ)
    assert req.is_oneway and not req.is_response and req.flag == RPC_ONEWAY
    req.opaque = 42
    resp = req.make_response(0, remark="ok")
    assert resp.is_response and resp.flag == RPC_RESPONSE
    assert resp.opaque == 42 and resp.serialize_type is SerializeType.ROCKETMQ
    assert RemotingCommand.response(1, "boom").is_response


def test_builders_equal_the_attrs_constructor():
    """The builders fill the slots themselves (no keyword ``__init__``): what they make
    equals the constructor's command field for field, and a subclass still gets its
    own fields' defaults. A field added to RemotingCommand and not to the builders
    fails here (the slot would be unset)."""
    hdr = object()
    assert RemotingCommand.request(
        310, hdr, body=b"b", ext_fields={"k": "v"}, remark="r", opaque=7, oneway=True, version=401,
        language=LanguageCode.CPP, serialize_type=SerializeType.ROCKETMQ,
    ) == RemotingCommand(310, LanguageCode.CPP, 401, 7, RPC_ONEWAY, "r", {"k": "v"}, b"b", hdr, SerializeType.ROCKETMQ)
    assert RemotingCommand.response(1, "boom", hdr, body=b"x", opaque=3) == RemotingCommand(
        code=1, opaque=3, flag=RPC_RESPONSE, remark="boom", body=b"x", custom_header=hdr)
    req = RemotingCommand(11, version=5, opaque=9, serialize_type=SerializeType.ROCKETMQ)
    assert req.make_response(0, ext_fields={"a": "1"}) == RemotingCommand(
        code=0, version=5, opaque=9, flag=RPC_RESPONSE, ext_fields={"a": "1"}, serialize_type=SerializeType.ROCKETMQ)
    sub = SendResponseCommand.response(0)
    assert type(sub) is SendResponseCommand and sub.template is None and sub.plain is None


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"", "no protocol word"),
        (b"\x00\x00\x00", "no protocol word"),
        (b"\x00\x00\x00\x10{}", "bad header length"),
        (b"\x05\x00\x00\x02{}", "unknown serialize type 5"),
    ],
)
def test_bad_payloads(payload, message):
    with pytest.raises(HeaderDecodeError, match=message):
        decode_command(payload)


@settings(max_examples=500)
@given(st.binary(max_size=120))
def test_garbage_payloads_raise_only_codec_errors(payload):
    try:
        decode_command(payload)
    except CodecError:
        pass


def test_hypothesis_examples_have_no_deadline():
    # tests/conftest.py loads the "trocket" profile unless HYPOTHESIS_PROFILE names
    # another: under coverage a correct example overran hypothesis's 200 ms default.
    assert settings.get_profile("trocket").deadline is None
    if os.environ.get("HYPOTHESIS_PROFILE", "trocket") == "trocket":
        assert settings().deadline is None
        assert settings(max_examples=300).deadline is None  # as the @settings(...) above build it
