"""A send request's ext fields left undecoded by the compiled header decoders (issue 29).

The compiled decoders (JSON and ROCKETMQ) read a send request's (SEND_MESSAGE, SEND_MESSAGE_V2,
SEND_BATCH_MESSAGE) send fields in their pass over the header and keep the extFields
object's text instead of a dict; ``command_send_fields`` hands the send processor those
fields, and ``RemotingCommand.ext_fields`` (``ext_fields_descriptor``'s twin) makes the
dict on the first read. Against the pure path (an eager dict, ``decode_send_fields`` of
it): the same send fields or the same error, then the same ext fields, in the same
order, and the same command and frame, whatever was read first.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle
import struct

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs import accel
from trocket.codecs.command import RemotingCommand, SerializeType
from trocket.codecs.errors import CustomHeaderError
from trocket.codecs.headers import fast
from trocket.codecs.serialize import encode_command

from .test_accel import _accel, cuts, edits, int_spellings, mostly, mutate, needs_accel, outcome
from .strategies import text

_V2_KEYS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "bname"]
_V1_KEYS = ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
            "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch",
            "bname"]
_INTS = {3, 4, 5, 6, 7, 9, 11}
_BOOLS = {10, 12}

#: a value as JSON text: mostly a string, else what the extFields object may hold
_json_value = st.one_of(
    int_spellings.map(json.dumps),
    st.integers(-(2**63), 2**63).map(str),
    st.sampled_from(["true", "false", "null", "-0", "1.5", "1e3", "[]", "{}"]),
)


#: a send's code (and others), the version its fields are read as, and their names
_codes = st.sampled_from([310, 310, 320, 10, 10, 11, 0]).flatmap(
    lambda code: (st.booleans() if code not in (10, 310, 320) else st.just(code != 10)).map(
        lambda v2: (code, v2, _V2_KEYS if v2 else _V1_KEYS)))


def _present(draw, keys: list[str]) -> list[tuple[int, str]]:
    """The fields a header carries: the optional ones missing one time in four, the
    required ones now and then."""
    return [(i, key) for i, key in enumerate(keys) if draw(st.integers(0, 3 if 8 <= i <= 13 else 40))]


@st.composite
def send_headers(draw) -> tuple[bytes, bool]:
    """A send request's JSON header as Java's clients (code first, fastjson's order) and
    odd ones write it: its fields as strings, numbers, true/false or null, now and then
    escaped, repeated, missing or unknown, and other codes; and the version it is read as."""
    code, v2, keys = draw(_codes)
    pairs = []
    for i, key in _present(draw, keys):
        if i in _INTS:
            value = draw(mostly(int_spellings.map(json.dumps), _json_value))
        elif i in _BOOLS:
            value = draw(mostly(st.sampled_from(['"true"', '"false"', '"1"', "true", "false", "null"]), _json_value))
        else:
            value = draw(mostly(text.map(lambda t: json.dumps(t, ensure_ascii=False)), _json_value))
        if draw(st.integers(0, 15)) == 0:
            value = json.dumps(value)  # (the value as a string holding its own text)
        pairs.append((json.dumps(key), value))
    for _ in range(draw(st.integers(0, 2))):  # unknown, repeated or escaped keys
        key = draw(st.sampled_from(keys) | text)
        pairs.insert(draw(st.integers(0, len(pairs))), (json.dumps(key, ensure_ascii=draw(st.booleans())),
                                                        draw(_json_value)))
    if pairs and draw(st.integers(0, 9)) == 0:  # a key escaped (\u0061 is "a")
        k, v = pairs[0]
        pairs[0] = ("".join(f"\\u{ord(ch):04x}" if ch.isalnum() else ch for ch in k), v)
    sep = draw(st.sampled_from([",", ",", ", ", " ,\n"]))
    ext = "{" + sep.join(f"{k}:{v}" for k, v in pairs) + "}"
    header = (f'{{"code":{code},"extFields":{ext},"flag":0,"language":"JAVA","opaque":{draw(st.integers(0, 99))},'
              f'"serializeTypeCurrentRPC":"JSON","version":395}}')
    return header.encode(), v2


#: UTF-8 text, and one time in fifty bytes that are not (the pure decoder's error)
_utf8_or_not = st.integers(0, 49).flatmap(
    lambda n: st.sampled_from([b"\xff", b"a\xc3", b"\xed\xa0\x80"]) if n == 0 else text.map(str.encode))


@st.composite
def binary_send_headers(draw) -> tuple[bytes, bool]:
    """:func:`send_headers` in the ROCKETMQ header (Java's and trocket's clients, the C++
    client's V1): its fields as UTF-8 text, now and then not, repeated or unknown."""
    code, v2, keys = draw(_codes)
    items = []
    for i, key in _present(draw, keys):
        if i in _INTS:
            value = draw(int_spellings.filter(lambda v: v is not None)).encode()
        elif i in _BOOLS:
            value = draw(mostly(st.sampled_from([b"true", b"false", b"1", b"0"]), _utf8_or_not))
        else:
            value = draw(_utf8_or_not)
        items.append((key.encode(), value))
    for _ in range(draw(st.integers(0, 2))):  # unknown or repeated keys
        key = draw(mostly(st.sampled_from(keys).map(str.encode), _utf8_or_not))
        items.insert(draw(st.integers(0, len(items))), (key, draw(_utf8_or_not)))
    ext = b"".join(struct.pack(">H", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in items)
    head = struct.pack(">hBhii", code, 0, 395, draw(st.integers(0, 99)), 0) + struct.pack(">i", 0)
    return head + struct.pack(">i", len(ext)) + ext, v2


#: (the decoder's name, the header, the version it is read as)
send_requests = st.one_of(
    send_headers().map(lambda c: ("decode_json_header", *c)),
    binary_send_headers().map(lambda c: ("decode_binary_header", *c)),
)


def _decoded(name: str, raw: bytes):
    """The pure decode (an eager dict) and the compiled one of the header ``raw``."""
    return outcome(accel.pure(name), raw), outcome(getattr(_accel, name), raw)


def _items(ext):
    return None if ext is None else list(ext.items())


def _fields(fn, cmd, v2):
    """``fn(cmd, v2)``'s outcome, a header error by its type (its message names the
    field, whose spelling the generic and the fast decoders may differ on)."""
    out = outcome(fn, cmd, v2)
    return out[:2] if out[0] == "error" and issubclass(out[1], CustomHeaderError) else out


@needs_accel
@given(send_requests, edits, cuts)
def test_command_send_fields_differential(case, edit, cut):
    """The send fields read in the decoder's pass against the pure path's (the dict's,
    through decode_send_fields), then the ext fields made on the first read: the same
    dict in the same order, the same command and frame."""
    name, raw, v2 = case
    for data in (raw, mutate(raw, edit, cut)):
        pure, compiled = _decoded(name, data)
        if pure[0] == "error":
            assert compiled == pure
            continue
        cmd, ref = compiled[1], pure[1]
        assert _fields(_accel.command_send_fields, cmd, v2) == _fields(accel.pure("command_send_fields"), ref, v2)
        assert _items(cmd.ext_fields) == _items(ref.ext_fields)
        assert cmd == ref and encode_command(cmd) == encode_command(ref)
        # the dict now in the slot: the same fields from it
        assert _fields(_accel.command_send_fields, cmd, v2) == _fields(accel.pure("command_send_fields"), ref, v2)


@needs_accel
@given(send_requests, st.sampled_from(["read", "set", "delete", "copy", "pickle", "evolve", "repr", "encode"]))
def test_ext_fields_descriptor_differential(case, action):
    """RemotingCommand.ext_fields (ext_fields_descriptor's twin) on a command whose ext
    fields were left undecoded, as the slot's own descriptor on the pure path's command:
    every way of reading, writing or copying a command gives the same result."""
    name, raw, _ = case
    pure, compiled = _decoded(name, raw)
    assert compiled[0] == pure[0]
    if pure[0] == "error":
        return
    results = []
    for cmd in (compiled[1], pure[1]):
        if action == "read":
            results.append(outcome(lambda: list(cmd.ext_fields.items())))
        elif action == "set":
            new = {"x": "1"}
            cmd.ext_fields = new
            results.append((cmd.ext_fields is new, cmd.ext_fields))
        elif action == "delete":
            del cmd.ext_fields
            results.append((outcome(lambda: cmd.ext_fields), outcome(lambda: cmd == cmd)))
        elif action == "copy":
            results.append(copy.copy(cmd))
        elif action == "pickle":
            results.append(pickle.loads(pickle.dumps(cmd)))
        elif action == "evolve":
            results.append(attrs.evolve(cmd, opaque=7))
        elif action == "repr":
            results.append(repr(cmd))
        else:
            results.append(encode_command(cmd))
    assert results[0] == results[1]
    assert accel.pure("ext_fields_descriptor")(RemotingCommand.__dict__["ext_fields"]) is RemotingCommand.__dict__[
        "ext_fields"]


JAVA_SEND = (
    b'{"code":310,"extFields":{"a":"PG","b":"SendPath","c":"TBW102","d":"4","e":"0","f":"0",'
    b'"g":"1700000000000","h":"0","i":"TAGS\\u0001t\\u0002WAIT\\u0001true\\u0002","j":"0","k":"false",'
    b'"m":"false"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":395}'
)


def _held(cmd) -> list[str]:
    """The types of what the command's slots hold."""
    return sorted(type(o).__name__ for o in gc.get_referents(cmd))


@needs_accel
def test_a_java_send_makes_no_dict_until_read():
    """What the Java producer sends: the compiled decode keeps the text, the send fields
    come from the decoder's pass, and the first read of ext_fields makes the dict (once)."""
    cmd = _accel.decode_json_header(JAVA_SEND)
    assert "dict" not in _held(cmd) and "_RawExt" in _held(cmd)
    fields = fast.command_send_fields(cmd, True)
    assert fields == ("SendPath", "TBW102", 4, 0, 0, 1700000000000, 0, "TAGS\x01t\x02WAIT\x01true\x02", 0, None, False)
    assert fast.command_send_fields(cmd, True) is fields  # (read once, in the decoder's pass)
    assert "dict" not in _held(cmd)
    ext = cmd.ext_fields
    assert "dict" in _held(cmd) and "_RawExt" not in _held(cmd)
    assert cmd.ext_fields is ext
    assert list(ext.items()) == list(accel.pure("decode_json_header")(JAVA_SEND).ext_fields.items())
    assert ext["i"] == "TAGS\x01t\x02WAIT\x01true\x02"
    # other requests keep the eager dict
    other = _accel.decode_json_header(JAVA_SEND.replace(b'"code":310', b'"code":11'))
    assert "dict" in _held(other) and "_RawExt" not in _held(other)
    # and so does a ROCKETMQ send (trocket's and the C++ client's)
    ref = accel.pure("decode_json_header")(JAVA_SEND)
    ref.serialize_type = SerializeType.ROCKETMQ
    cmd = _accel.decode_command(encode_command(ref)[4:])
    assert "dict" not in _held(cmd) and "_RawExt" in _held(cmd)
    assert fast.command_send_fields(cmd, True) is fast.command_send_fields(cmd, True) == fields
    assert list(cmd.ext_fields.items()) == list(ref.ext_fields.items()) and cmd == ref


def test_a_bad_send_header_is_the_dicts_error(impl_send_fields):
    """A field that does not check: the pure path's error, on either path."""
    cmd = impl_send_fields[0](JAVA_SEND.replace(b'"e":"0"', b'"e":"x"'))
    with pytest.raises(CustomHeaderError):
        impl_send_fields[1](cmd, True)


@pytest.fixture(params=["pure", "accel"])
def impl_send_fields(request):
    if request.param == "accel":
        if not accel.ACTIVE:
            pytest.skip(f"accelerator off: {accel.REASON}")
        return _accel.decode_json_header, _accel.command_send_fields
    return accel.pure("decode_json_header"), accel.pure("command_send_fields")
