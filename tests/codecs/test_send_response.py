"""The send answer's template (codecs/send_response.py) writes the generic encoder's
bytes exactly, both serializations, and hands anything off its shape back to it."""

from __future__ import annotations

import random

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.custom_header import encode_header
from trocket.codecs.headers import SendMessageResponseHeader
from trocket.codecs.message.msgid import encode_offset_msg_id
from trocket.codecs.send_response import SendResponseCommand, SendResponseTemplate
from trocket.codecs.serialize import decode_command, encode_command

OK_EXT = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
TYPES = (SerializeType.JSON, SerializeType.ROCKETMQ)


def generic(cmd: RemotingCommand) -> bytes:
    """The same command as a plain RemotingCommand, through the generic encoder."""
    plain = RemotingCommand(**{f.name: getattr(cmd, f.name) for f in attrs.fields(RemotingCommand)})
    if plain.ext_fields is not None:
        plain.ext_fields = dict(plain.ext_fields)
    return encode_command(plain)


def answered(template: SendResponseTemplate, stype, code, opaque, msg_id, queue_id, queue_offset, id_is_plain=False):
    cmd = template.command(code, msg_id, queue_id, queue_offset, id_is_plain=id_is_plain)
    cmd.opaque = opaque  # what Connection.answer does
    cmd.flag |= 1
    cmd.serialize_type = stype
    return cmd


def test_ext_fields_are_the_response_headers_then_the_extra():
    """The processor's answer before the template: the header's codec, then the extra."""
    template = SendResponseTemplate(OK_EXT)
    cmd = template.command(0, "7F00000100002A9F000000000000ABCD", 3, 12345)
    fields = encode_header(SendMessageResponseHeader(msgId="7F00000100002A9F000000000000ABCD", queueId=3, queueOffset=12345))
    assert cmd.ext_fields == {**fields, **OK_EXT}
    assert list(cmd.ext_fields) == [*fields, *OK_EXT]


@pytest.mark.parametrize("stype", TYPES)
def test_many_values_byte_exact(stype):
    rng = random.Random(12)
    template = SendResponseTemplate(OK_EXT)
    for i in range(3000):
        ip = ".".join(str(rng.randrange(256)) for _ in range(4))
        count = 1 if i % 10 else rng.randrange(2, 6)  # a batch: comma-joined ids
        msg_id = ",".join(
            encode_offset_msg_id(ip, rng.randrange(65536), rng.randrange(1 << rng.choice((8, 32, 63))))
            for _ in range(count)
        )
        code = rng.choice((0, 0, 0, 10, 11, 12, -1, 32767, -32768))
        opaque = rng.choice((0, 1, -1, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)))
        queue_id = rng.choice((0, 1, 7, 1023, 1024, 65535, 2**31 - 1, -1))
        queue_offset = rng.choice((0, 1, rng.randrange(1 << 62), 2**63 - 1, -1))
        # the send processor vouches for its store-made ids (id_is_plain): the same bytes
        cmd = answered(template, stype, code, opaque, msg_id, queue_id, queue_offset, id_is_plain=bool(i % 2))
        frame = encode_command(cmd)
        assert cmd.encode_frame() is not None  # the template wrote it
        assert frame == generic(cmd), (stype, code, opaque, msg_id, queue_id, queue_offset)
        back = decode_command(frame[4:])
        assert back.ext_fields == cmd.ext_fields and back.opaque == opaque and back.code == code


@settings(max_examples=300, deadline=None)
@given(
    stype=st.sampled_from(TYPES),
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    msg_id=st.text(st.sampled_from("0123456789ABCDEF,"), max_size=100),
    queue_id=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(-(2**63), 2**63 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    flag=st.integers(0, 2**31 - 1),
    language=st.sampled_from(list(LanguageCode)),
    extra=st.dictionaries(
        st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(
            lambda k: k not in ("msgId", "queueId", "queueOffset")
        ),
        st.text(st.characters(codec="utf-8"), max_size=12),
        max_size=3,
    ),
)
def test_any_values_byte_exact(stype, code, opaque, msg_id, queue_id, queue_offset, version, flag, language, extra):
    """Any template (its constant fields with characters JSON escapes), any values."""
    cmd = answered(SendResponseTemplate(extra), stype, code, opaque, msg_id, queue_id, queue_offset)
    cmd.version = version
    cmd.flag = flag
    cmd.language = language
    assert cmd.encode_frame() is not None
    assert encode_command(cmd) == generic(cmd)


@pytest.mark.parametrize("stype", TYPES)
@pytest.mark.parametrize(
    "change",
    [
        lambda c: setattr(c, "remark", "a remark"),
        lambda c: setattr(c, "body", b"body"),
        lambda c: c.ext_fields.__setitem__("extra", "1"),
        lambda c: c.ext_fields.pop("TRACE_ON"),
        lambda c: c.ext_fields.__setitem__("MSG_REGION", "Other"),
        lambda c: c.ext_fields.__setitem__("msgId", 'quote"and\\back\x01slash'),
        lambda c: c.ext_fields.__setitem__("queueId", "\u00e9"),
        lambda c: c.ext_fields.update({"queueId": c.ext_fields.pop("queueId")}),  # reordered
        lambda c: setattr(c, "ext_fields", None),
        lambda c: setattr(c, "custom_header", SendMessageResponseHeader(msgId="AB", queueId=1, queueOffset=2)),
        lambda c: setattr(c, "language", 1),
        lambda c: setattr(c, "code", True),
    ],
)
def test_off_the_shape_goes_generic(stype, change):
    """What an RPC hook may do to the answer: the bytes (or the error) are the generic ones."""
    cmd = answered(SendResponseTemplate(OK_EXT), stype, 0, 5, "7F00000100002A9F000000000000ABCD", 1, 2)
    change(cmd)
    assert cmd.encode_frame() is None
    assert_generic(cmd)


@pytest.mark.parametrize("stype", TYPES)
@pytest.mark.parametrize("field", ["opaque", "code", "version", "flag"])
@pytest.mark.parametrize("value", [2**15, -(2**15) - 1, 2**31, -(2**31) - 1, 2**40])
def test_out_of_range_as_generic(stype, field, value):
    """JSON writes any int; the binary header refuses what does not fit, as the generic
    encoder does (the template hands those to it)."""
    cmd = answered(SendResponseTemplate(OK_EXT), stype, 0, 5, "7F00000100002A9F000000000000ABCD", 1, 2)
    setattr(cmd, field, value)
    assert_generic(cmd)


def assert_generic(cmd: SendResponseCommand) -> None:
    try:
        expected = generic(cmd)
    except Exception as exc:
        with pytest.raises(type(exc)):
            encode_command(cmd)
    else:
        assert encode_command(cmd) == expected


@pytest.mark.parametrize("stype", TYPES)
def test_values_changed_after_made_are_checked_again(stype):
    """A hook that puts other (plain) values in: still the template, with them."""
    cmd = answered(SendResponseTemplate(OK_EXT), stype, 0, 5, "7F00000100002A9F000000000000ABCD", 1, 2)
    cmd.ext_fields["msgId"] = "0A0000010000" + "1" * 20
    cmd.ext_fields["queueOffset"] = "99"
    assert cmd.encode_frame() is not None
    assert encode_command(cmd) == generic(cmd)
    assert decode_command(encode_command(cmd)[4:]).ext_fields["queueOffset"] == "99"


@pytest.mark.parametrize("stype", TYPES)
@pytest.mark.parametrize("msg_id", ["\u00e9t\u00e92", "A,B", "-", "", "\u00b2", "A B", "A\u2028"])
def test_unusual_message_ids(stype, msg_id):
    """Alphanumerics beyond ASCII need no JSON escape (UTF-8 bytes in both headers);
    anything else is checked by the pattern or goes generic: always the generic bytes."""
    cmd = answered(SendResponseTemplate(OK_EXT), stype, 0, 5, msg_id, 1, 2)
    assert encode_command(cmd) == generic(cmd)


def test_template_rejects_the_headers_own_keys():
    with pytest.raises(ValueError):
        SendResponseTemplate({"msgId": "x"})


# -- encode_send_ok: the answer's frame with no command (the send processor's own) --------

from trocket.codecs import accel  # noqa: E402
from trocket.codecs.send_response import encode_send_ok  # noqa: E402


@pytest.fixture(params=["pure", "accel"], scope="module")
def send_ok(request):
    if request.param == "accel":
        if not accel.ACTIVE:
            pytest.skip(f"accelerator off: {accel.REASON}")
        from trocket.codecs import _accel

        return _accel.encode_send_ok
    return accel.pure("encode_send_ok")


def test_encode_send_ok_is_the_active_twin():
    if accel.ACTIVE:
        from trocket.codecs import _accel

        assert encode_send_ok is _accel.encode_send_ok
    else:
        assert encode_send_ok is accel.pure("encode_send_ok")


@settings(max_examples=400, deadline=None)
@given(
    stype=st.sampled_from(TYPES),
    opaque=st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**70), 2**70)),
    msg_id=st.one_of(
        st.text(st.sampled_from("0123456789ABCDEF,"), max_size=100),
        st.text(st.characters(codec="utf-8"), max_size=12),
    ),
    queue_id=st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**70), 2**70)),
    queue_offset=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70)),
    extra=st.sampled_from([OK_EXT, {}, {"k\u00e9y": 'v"\\'}]),
)
def test_encode_send_ok_is_the_commands_frame(send_ok, stype, opaque, msg_id, queue_id, queue_offset, extra):
    """The bytes are those of the answered command (the template's, so the generic
    encoder's); None (the caller answers with the command) for a message id of other
    characters than a store's (ASCII alphanumerics, commas, dashes) or values the binary
    header cannot hold -- never for a store's id with a real opaque, queue id and offset."""
    template = SendResponseTemplate(extra)
    frame = send_ok(template, stype, opaque, msg_id, queue_id, queue_offset)
    assert frame == accel.pure("encode_send_ok")(template, stype, opaque, msg_id, queue_id, queue_offset)
    cmd = answered(template, stype, 0, opaque, msg_id, queue_id, queue_offset)
    if frame is not None:
        assert frame == encode_command(cmd) == generic(cmd)
    store_like = set(msg_id) <= set("0123456789ABCDEF,") and 0 <= opaque < 2**31 and 0 <= queue_id < 2**31
    if store_like and 0 <= queue_offset < 2**63:
        assert frame is not None


@pytest.mark.parametrize("stype", TYPES)
@pytest.mark.parametrize(
    "args",
    [
        (5, 1.5, 1, 2), (5, "AB", "1", 2), (5, "AB", 1, 2.0), ("5", "AB", 1, 2), (True, "AB", 1, 2),
        (5, "A\"B", 1, 2), (5, "A B", 1, 2), (5, b"AB", 1, 2),
    ],
)
def test_encode_send_ok_off_the_shape_is_none(send_ok, stype, args):
    assert send_ok(SendResponseTemplate(OK_EXT), stype, *args) is None


def test_encode_send_ok_other_serialize_type_is_none(send_ok):
    assert send_ok(SendResponseTemplate(OK_EXT), 2, 5, "AB", 1, 2) is None
