"""The compiled codec accelerator (codecs/_accel.pyx) against its pure-Python references.

Every accelerated function is run on the same input through both paths (the ``impl``
fixture, and hypothesis differential tests): same result, or the same error type and
message. CI also runs the codec tests with ``TROCKET_PURE=1`` (.ci/run), so the pure
functions keep their own tests.
"""

from __future__ import annotations

import importlib
import inspect
import gc
import json
import os
import pkgutil
import struct
import sys
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import attrs
import pytest
from hypothesis import given, is_hypothesis_test, settings
from hypothesis import strategies as st

import trocket.codecs
from trocket.codecs import accel
from trocket.codecs import command as command_module
from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType
from trocket.codecs.custom_header import codec_of, field, header, header_fields
from trocket.codecs.errors import CustomHeaderError, MessageDecodeError, MessageEncodeError
from trocket.codecs.header_binary import encode_binary_header
from trocket.codecs.header_json import encode_json_header
from trocket.codecs.headers import fast
from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message import index as index_file
from trocket.codecs.message import msgid, properties, record
from trocket.codecs.serialize import encode_command

from .strategies import commands, text


def _declared_twins() -> dict[str, object]:
    """Every twin the code declares (``name = accelerated(name)``, which records the pure
    function in ``accel._PURE``): every codecs module imported, name -> pure reference."""
    for info in pkgutil.walk_packages(trocket.codecs.__path__, trocket.codecs.__name__ + "."):
        if not info.name.endswith("._accel"):
            importlib.import_module(info.name)
    importlib.import_module("trocket.remoting.rpc")  # the one twin declared above codecs: Reply
    return dict(accel._PURE)


TWINS = _declared_twins()
NAMES = tuple(sorted(TWINS))

#: Each twin -> its differential test: generated input through both paths, the same
#: outcome (``test_every_twin_has_a_differential_test`` holds this to the twins the code
#: declares and the compiled module exports, so a new twin fails until it has one).
#: ``module::test`` for a test in another module of this directory.
DIFFERENTIAL = {
    "FrameDecoder": "test_frame_decoder_differential",
    "Reply": "test_reply_differential",
    "build_command": "test_build_command_differential",
    "response_command": "test_response_command_differential",
    "decode_binary_header": "test_binary_header_differential",
    "decode_command": "test_decode_command_differential",
    "decode_json_header": "test_json_header_differential",
    "decode_properties": "test_get_property_differential",
    "decode_send_fields": "test_send_fields_differential",
    "command_send_fields": "test_accel_send_ext::test_command_send_fields_differential",
    "ext_fields_descriptor": "test_accel_send_ext::test_ext_fields_descriptor_differential",
    "decode_send_message": "test_send_header_v1_differential",
    "decode_send_message_v2": "test_send_header_v2_differential",
    "dispatch_fields": "test_dispatch_fields_differential",
    "encode_binary_header": "test_binary_header_encode_differential",
    "encode_command": "test_encode_command_differential",
    "encode_json_header": "test_json_header_encode_differential",
    "encode_pull_message": "test_pull_header_encode_differential",
    "encode_record_batch": "test_capture_batch::test_record_batch_differential",
    "encode_record_into": "test_record_encode_differential",
    "encode_send_message_v2": "test_send_header_v2_encode_differential",
    "encode_send_ok": "test_send_response::test_encode_send_ok_is_the_commands_frame",
    "encode_store_record": "test_store_record_differential",
    "get_property": "test_get_property_differential",
    "hashmap_properties": "test_hashmap_properties_differential",
    "java_string_hash": "test_java_string_hash_differential",
    "index_records": "test_index_records_differential",
    "offset_msg_id": "test_offset_msg_id_differential",
    "place_record": "test_place_record_differential",
    "send_properties": "test_send_properties_differential",
    "send_signature_matches": "test_send_signature_matches_differential",
    "signature_matches": "test_signature_matches_differential",
    "specialize_codec": "test_custom_header_compiled::test_specialized_codec_differential",
    "without_properties_bytes": "test_without_properties_bytes_differential",
}
GOLDEN = Path(__file__).resolve().parents[2] / "conformance" / "golden"
PURE_FORCED = os.environ.get("TROCKET_PURE", "") not in ("", "0")

if accel.ACTIVE:
    from trocket.codecs import _accel
else:
    _accel = None

needs_accel = pytest.mark.skipif(not accel.ACTIVE, reason=f"accelerator off: {accel.REASON}")


def test_accelerator_is_active_unless_forced_off():
    """A build that silently lost its extension fails here (and in .ci/run)."""
    if PURE_FORCED:
        assert not accel.ACTIVE
        pytest.skip("TROCKET_PURE is set: the pure path is forced")
    assert accel.ACTIVE, (
        f"the compiled codec accelerator is not in use: {accel.REASON}. Reinstall with a C "
        "compiler (pip install -e '.[test]'), or set TROCKET_PURE=1 to test the pure path only."
    )


def _compiled_twins() -> set[str]:
    """What the compiled module defines and exports, but its own registration hooks
    (the pure functions it hands over to; the objects of modules above the wire part)."""
    return {
        name for name, value in vars(_accel).items()
        if not name.startswith("_") and callable(value) and getattr(value, "__module__", None) == _accel.__name__
    } - {"set_pure", "provide"}


def test_every_twin_has_a_differential_test():
    """The twins the code declares, the compiled module's and DIFFERENTIAL's are one set;
    each one's test is a hypothesis test that names it."""
    assert set(DIFFERENTIAL) == set(TWINS), "DIFFERENTIAL must map exactly the twins the code declares"
    if accel.ACTIVE:
        assert _compiled_twins() == set(TWINS), "every compiled twin declared with accelerated(), and back"
    here = importlib.import_module(__name__)
    for name, where in DIFFERENTIAL.items():
        module, _, test = where.rpartition("::")
        owner = importlib.import_module(f"{__package__}.{module}") if module else here
        fn = getattr(owner, test, None)
        assert fn is not None, f"{name}: no {where}"
        assert is_hypothesis_test(fn), f"{name}: {where} is no hypothesis test"
        assert name in inspect.getsource(fn), f"{name}: {where} does not run it"


def test_the_switch_is_wired():
    """The public names are the twins when active, the references when not: each where
    ``name = accelerated(name)`` put it, and the send and pull codecs' table."""
    public = {name: getattr(importlib.import_module(pure.__module__), name) for name, pure in TWINS.items()}
    aliases = [
        ("decode_send_message", fast.FAST_CODECS[fast._V1].decode),
        ("decode_send_message_v2", fast.FAST_CODECS[fast._V2].decode),
        ("encode_send_message_v2", fast.FAST_CODECS[fast._V2].encode),
        ("encode_pull_message", fast.FAST_CODECS[fast._PQ].encode),
    ]
    for name, fn in [*public.items(), *aliases]:
        expected = getattr(_accel, name) if accel.ACTIVE else accel.pure(name)
        assert fn is expected, name


@pytest.fixture(params=["pure", "accel"])
def impl(request) -> SimpleNamespace:
    """The accelerated functions, from one path or the other."""
    if request.param == "accel":
        if not accel.ACTIVE:
            pytest.skip(f"accelerator off: {accel.REASON}")
        return SimpleNamespace(**{n: getattr(_accel, n) for n in NAMES})
    return SimpleNamespace(**{n: accel.pure(n) for n in NAMES})


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # the error's type and message must match
        return ("error", type(exc), str(exc))


def same(name, *args, **kwargs):
    """Both paths on the same input; returns the common outcome."""
    pure = outcome(accel.pure(name), *args, **kwargs)
    if accel.ACTIVE:
        assert outcome(getattr(_accel, name), *args, **kwargs) == pure
    return pure


# -- fixed cases through the fixture ---------------------------------------------------

GOLDEN_FRAMES = sorted(GOLDEN.rglob("*.bin"))


def test_golden_frames_decode(impl):
    assert GOLDEN_FRAMES
    for path in GOLDEN_FRAMES:
        raw = path.read_bytes()
        cmd = impl.decode_command(raw[4:])
        assert cmd == accel.pure("decode_command")(raw[4:]), path.name
        if "captures" not in path.parts:  # written by Java or by us: re-encodes exactly
            assert encode_command(cmd) == raw, path.name


CPP_SEND = (
    b'{"code":10,"extFields":{"producerGroup":"g","topic":"T","defaultTopic":"TBW102",'
    b'"defaultTopicQueueNums":4,"queueId":2,"sysFlag":0,"bornTimestamp":"1700000000123","flag":0,'
    b'"properties":"TAGS\\u0001a\\u0002WAIT\\u0001true\\u0002","reconsumeTimes":"0","unitMode":"0",'
    b'"batch":"0"},"flag":0,"language":"CPP","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}'
)


def test_frame_decoder(impl):
    raw = b"".join(path.read_bytes() for path in GOLDEN_FRAMES[:6])
    decoder = impl.FrameDecoder(max_frame_length=1 << 20)
    assert decoder.max_frame_length == 1 << 20
    frames = []
    for at in range(0, len(raw), 7):
        decoder.feed(raw[at : at + 7])
        frames += list(decoder)
    decoder.close()
    assert b"".join(len(f).to_bytes(4, "big") + f for f in frames) == raw
    with pytest.raises(ValueError):
        impl.FrameDecoder(3)


def test_cpp_client_send_header(impl):
    cmd = impl.decode_json_header(CPP_SEND)
    assert cmd.language is LanguageCode.CPP and cmd.opaque == 7 and cmd.version == 409
    assert cmd.ext_fields["defaultTopicQueueNums"] == "4"
    assert cmd.ext_fields["properties"] == "TAGS\x01a\x02WAIT\x01true\x02"
    header = impl.decode_send_message(cmd.ext_fields)
    assert (header.queueId, header.bornTimestamp, header.unitMode, header.batch) == (2, 1700000000123, False, False)


@pytest.mark.parametrize(
    "raw",
    [
        b"", b"{", b"[]", b'{"code":1.5}', b'{"code":"12"}', b'{"code":true}', b'{"code":2147483648}',
        b'{"extFields":{"k":1.0}}', b'{"extFields":{"k":1e3}}', b'{"extFields":{"k":[1]}}',
        b'{"extFields":{"k":"\\ud800"}}', b'{"extFields":{"k":"\\ud83d\\ude00"}}', b'{"extFields":{"k":-0}}',
        b'{"extFields":{"k":null,"j":"x","k":"y"}}', b'{"extFields":{"a":"1","a":"2"}}', b'{"remark":5}',
        b'{"code":01}', b' \n{"code":1} \t', b'{"code":1}x', b'{"extFields":"x"}', b'{"language":"NOPE"}',
        b'{"language":3}', b'{"remark":"a\nb"}', b'{"remark":"\xff"}', b'{"k":{"nested":1}}',
        b'{"extFields":{"k":"\\q"}}', b'{"extFields":{"k":"\\u00e9\\"\\\\\\/\\b\\f\\n\\r\\t"}}',
        b'{"code":null,"flag":-5,"opaque":-2147483648,"version":0}', b'{}', b'{"extFields":{}}',
        b'{"extFields":null}', b'{"a":NaN}', b'{"extFields":{"k":123456789012345678901234}}',
        # the string cache's length bound (32 bytes) and a short non-ASCII string
        b'{"extFields":{"' + b"k" * 32 + b'":"' + b"a" * 32 + b'","j":"' + b"b" * 33 + b'"}}',
        b'{"remark":"ab\xc3\xa9","extFields":{"\xc3\xa9":"\x7f"}}',
        # 18 and 19 digits; int32 bounds
        b'{"extFields":{"k":123456789012345678,"j":-1234567890123456789}}',
        b'{"code":-0,"flag":2147483647,"opaque":-2147483649}', b'{"code":1234567890123456789}',
        # an escaped string past the unescape stack buffer
        b'{"remark":"\\n' + b"x" * 3000 + b'"}', b'{"remark":"\\n' + b"x" * 3000,
    ],
)
def test_json_edge_cases(raw):
    same("decode_json_header", raw)


def test_record_into_memoryview_and_errors():
    args = dict(topic="T", body=b"x", properties="A\x01b", born_host=("127.0.0.1", 1), store_host=("::1", 2))
    for buf in (bytearray(200), memoryview(bytearray(200)), bytearray(10)):
        for sys_flag in (0, 0x20):
            pure_buf, accel_buf = bytearray(buf), bytearray(buf)
            assert outcome(accel.pure("encode_record_into"), pure_buf, 0, sys_flag=sys_flag, **args) == same(
                "encode_record_into", bytearray(buf), 0, sys_flag=sys_flag, **args
            )
            if accel.ACTIVE:
                outcome(_accel.encode_record_into, accel_buf, 0, sys_flag=sys_flag, **args)
                assert accel_buf == pure_buf


# -- differential (hypothesis) ---------------------------------------------------------


def mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for at, byte in edits:
        if out:
            out[at % len(out)] = byte
    if cut is not None:
        out = out[: cut % (len(out) + 1)]
    return bytes(out)


edits = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3)
cuts = st.none() | st.integers(0, 400)


@needs_accel
@given(commands(SerializeType.ROCKETMQ), edits, cuts)
def test_binary_header_differential(cmd, edits, cut):
    raw = encode_binary_header(cmd, cmd.ext_fields)
    same("decode_binary_header", raw)
    same("decode_binary_header", mutate(raw, edits, cut))


odd_values = st.none() | st.integers() | text | st.just("\ud800") | st.just("x" * 70000)


@needs_accel
@given(
    commands(SerializeType.ROCKETMQ),
    st.none() | st.integers(-(2**40), 2**40),  # code
    st.none() | st.integers(-5, 300) | st.sampled_from(list(LanguageCode)),  # language
    st.none() | st.integers(-(2**33), 2**33),  # opaque
    st.none() | text | st.just("\udfff") | st.integers(),  # remark
    st.lists(st.tuples(text | st.integers() | st.just("k" * 70000), odd_values), max_size=3),  # extra ext items
)
def test_binary_header_encode_differential(cmd, code, language, opaque, remark, extra):
    """The encoder's twin: the same bytes, or the pure function's own error, for what a
    command holds and for what it should not (out-of-range numbers, a lone surrogate,
    non-str keys and values, None values, a key too long)."""
    assert same("encode_binary_header", cmd, cmd.ext_fields)[0] == "ok"  # what a command holds encodes
    for name, value in (("code", code), ("language", language), ("opaque", opaque), ("remark", remark)):
        if value is not None:
            setattr(cmd, name, value)
    ext = dict(cmd.ext_fields or {})
    ext.update(extra)
    same("encode_binary_header", cmd, ext)
    same("encode_binary_header", cmd, None)


@needs_accel
@given(
    commands(SerializeType.JSON),
    st.none() | st.integers(-(2**70), 2**70) | st.booleans() | st.sampled_from(list(LanguageCode)),  # code
    st.none() | st.integers(-5, 300) | st.sampled_from(list(LanguageCode)),  # language
    st.none() | st.integers(-(2**65), 2**65),  # opaque
    st.none() | text | st.just("") | st.just('q"\\') | st.just("\x7f\u2028") | st.integers(),  # remark
    st.lists(st.tuples(text | st.integers() | st.just("k\x01"), odd_values), max_size=3),  # extra ext items
)
def test_json_header_encode_differential(cmd, code, language, opaque, remark, extra):
    """The JSON encoder's twin: fastjson's bytes, or the pure function's own error, for
    what a command holds and for what it should not (numbers past a long, bools, unknown
    languages, characters fastjson escapes, non-str keys and values, None values)."""
    assert same("encode_json_header", cmd, cmd.ext_fields)[0] == "ok"  # what a command holds encodes
    for name, value in (("code", code), ("language", language), ("opaque", opaque), ("remark", remark)):
        if value is not None:
            setattr(cmd, name, value)
    ext = dict(cmd.ext_fields or {})
    ext.update(extra)
    same("encode_json_header", cmd, ext)
    same("encode_json_header", cmd, {})
    same("encode_json_header", cmd, None)


def test_binary_header_encode_round_trips(impl):
    cmd = RemotingCommand(code=310, language=LanguageCode.CPP, version=401, opaque=7, flag=0,
                          remark="r\u00e9", serialize_type=SerializeType.ROCKETMQ)
    ext = {"a": "g", "b": "T\u00e9", "none": None, "": ""}
    raw = impl.encode_binary_header(cmd, ext)
    back = impl.decode_binary_header(raw)
    assert (back.code, back.language, back.version, back.opaque, back.remark) == (310, LanguageCode.CPP, 401, 7, "r\u00e9")
    assert back.ext_fields == {"a": "g", "b": "T\u00e9", "": ""}
    assert raw == accel.pure("encode_binary_header")(cmd, ext)


@needs_accel
@given(st.binary(max_size=64))
def test_binary_header_garbage(raw):
    same("decode_binary_header", raw)


common_scalars = st.one_of(text, st.integers(-(2**31), 2**31 - 1), st.booleans(), st.none())
odd_scalars = st.one_of(
    st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["\ud800", "\udc00x", "\x00\x1f\x7f\u2028", "\U0001F600"]),
)



def mostly(common, odd):
    """``common`` nine times in ten, else ``odd``: mostly what clients send (the twin's
    own path), now and then what only the pure path takes."""
    return st.integers(0, 9).flatmap(lambda n: odd if n == 0 else common)


scalars = mostly(common_scalars, odd_scalars)


@st.composite
def json_headers(draw) -> bytes:
    """JSON headers as real clients and odd ones write them: any key order, values of any
    scalar type, escapes or raw UTF-8, whitespace."""
    obj = {}
    for key in draw(st.permutations(["code", "extFields", "flag", "language", "opaque", "remark",
                                     "serializeTypeCurrentRPC", "version", "other"])):
        if not draw(st.integers(0, 4)):
            continue
        if key == "extFields":
            obj[key] = draw(mostly(st.dictionaries(text, common_scalars, max_size=5),
                                   st.none() | st.dictionaries(text, scalars, max_size=5)))
        elif key == "language":
            obj[key] = draw(mostly(st.sampled_from([lang.name for lang in LanguageCode]),
                                   st.sampled_from([None, 3, "x", 1.5])))
        elif key in ("code", "flag", "opaque", "version"):
            obj[key] = draw(mostly(st.integers(-(2**31), 2**31 - 1), scalars))
        else:
            obj[key] = draw(scalars)
    indent = draw(st.sampled_from([None, None, 1]))
    text_ = json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=indent)
    return (draw(st.sampled_from(["", " ", "\n"])) + text_ + draw(st.sampled_from(["", " \t"]))).encode(
        "utf-8", "surrogatepass"
    )


@needs_accel
@given(json_headers(), edits, cuts)
def test_json_header_differential(raw, edits, cut):
    same("decode_json_header", raw)
    same("decode_json_header", mutate(raw, edits, cut))


@needs_accel
@given(commands(SerializeType.JSON))
def test_json_header_of_our_encoder(cmd):
    raw = encode_json_header(cmd, cmd.ext_fields)
    assert same("decode_json_header", raw)[0] == "ok"


@needs_accel
@given(commands(), edits, cuts, st.integers(0, 3))
def test_decode_command_differential(cmd, edits, cut, stype):
    try:
        frame = encode_command(cmd)
    except Exception:
        return
    payload = frame[4:]
    same("decode_command", payload)
    bad = bytearray(mutate(payload, edits, cut))
    if bad:
        bad[0] = stype if stype < 3 else bad[0]
    same("decode_command", bytes(bad))


int_spellings = mostly(
    st.integers(-1, 2000).map(str) | st.integers(0, 999_999_999).map(str),
    st.integers(0, 2**63).map(str) | st.none()
    | st.sampled_from(["", "+1", "01", "-0", "-2", " 1", "1.0", "\u0663", "x", "99999999999999999999"]),
)
bool_spellings = mostly(st.sampled_from(["true", "false", "0", "1", "True", "False", None]),
                        st.sampled_from(["", "yes", "FALSE", 1, 1.5, (1,)]) | st.lists(st.none(), max_size=1))


@st.composite
def send_exts(draw, v2: bool) -> dict:
    keys = (
        ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "bname"] if v2 else
        ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
         "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch",
         "bname"]
    )
    ext = {}
    for i, key in enumerate(keys):
        if draw(st.integers(0, 3 if i in (8, 9, 10, 11, 12, 13, 14) else 60)) == 0:
            continue  # missing
        if i in (3, 4, 5, 6, 7, 9, 11):
            ext[key] = draw(int_spellings)
        elif i == 6:
            ext[key] = draw(mostly(st.integers(0, 2**62).map(str), int_spellings))
        elif i in (10, 12):
            ext[key] = draw(bool_spellings)
        else:
            ext[key] = draw(mostly(text, st.none() | st.integers(0, 3)))
    return ext


@needs_accel
@given(send_exts(v2=True))
def test_send_header_v2_differential(ext):
    same("decode_send_message_v2", ext)


@needs_accel
@given(send_exts(v2=False))
def test_send_header_v1_differential(ext):
    same("decode_send_message", ext)


@needs_accel
@given(st.booleans().flatmap(lambda v2: st.tuples(st.just(v2), send_exts(v2=v2))))
def test_send_fields_differential(case):
    """Both versions' send fields, from the same ext maps as the header twins."""
    v2, ext = case
    result = same("decode_send_fields", ext, v2)
    if result[0] == "ok":
        assert type(result[1]) is tuple and len(result[1]) == len(fast.SendFields._fields)
        assert type(_accel.decode_send_fields(ext, v2)) is tuple


def test_send_fields_are_the_headers_fields(impl):
    """What the send processor reads: the header's fields under V1's names, both versions."""
    v2 = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000123", "h": "7",
          "i": "TAGS\x01t\x02", "j": "2", "k": "false", "l": "16", "m": "true"}
    f = impl.decode_send_fields(v2, True)
    assert f == fast.SendFields("T", "TBW102", 4, 3, 0, 1700000000123, 7, "TAGS\x01t\x02", 2, 16, True)
    v1 = {"producerGroup": "g", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
          "queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000123", "flag": "7",
          "properties": "TAGS\x01t\x02", "reconsumeTimes": "2", "unitMode": "0", "batch": "1"}
    f = fast.SendFields._make(impl.decode_send_fields(v1, False))
    assert (f.topic, f.queueId, f.reconsumeTimes, f.maxReconsumeTimes, f.batch) == ("T", 3, 2, None, True)
    with pytest.raises(CustomHeaderError):  # the generic decoder's error, both paths
        impl.decode_send_fields({**v2, "e": "x"}, True)


# -- the request header encoders ---------------------------------------------------------

class _V2Sub(fast._V2):
    """A subclass: the twin leaves it to the pure encoder."""


_UNSET = object()
#: Slot values by kind: mostly what the class declares, now and then what only the pure
#: path takes (a bool or an enum where an int belongs, a float, a str, None, no value).
_header_ints = mostly(
    st.integers(-1, 1100) | st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**70) | st.integers(-(2**70), -2) | st.booleans() | st.none()
    | st.just(SerializeType.ROCKETMQ) | st.floats(allow_nan=False) | text | st.just(_UNSET),
)
_header_bools = mostly(st.booleans() | st.none(), st.integers(0, 2) | text | st.just(_UNSET))
_header_strs = mostly(text | st.none(), st.integers() | st.just(_UNSET))
_KINDS = {"int": _header_ints, "long": _header_ints, "bool": _header_bools, "str": _header_strs}


@st.composite
def header_objects(draw, cls) -> object:
    """An instance of ``cls`` (or now and then of a subclass) with its slots filled from
    the strategies above, left unset where one drew ``_UNSET``."""
    sub = {fast._V2: _V2Sub}.get(cls)
    o = object.__new__(sub if sub is not None and draw(st.integers(0, 9)) == 0 else cls)
    for spec in header_fields(cls):
        value = draw(_KINDS[spec.kind])
        if value is not _UNSET:
            setattr(o, spec.name, value)
    return o


def _items(fn):
    """``fn``'s dict as its items in order (the wire keeps the dict's order)."""
    return lambda o: list(fn(o).items())


def same_encoded(name, o):
    pure = outcome(_items(accel.pure(name)), o)
    if accel.ACTIVE:
        assert outcome(_items(getattr(_accel, name)), o) == pure
    return pure


@header
class _TypedHeader:
    """A typed service's header (a generated codec, not a FastCodes header): the
    whole-frame twin encodes it alone by its class's ``encode_wire``, the pure path
    through ``wire_ext_fields``."""

    key: str = field("str", required=True)
    count: int | None = field("int")
    offset: int | None = field("long")
    flag: bool = field("bool", default=False)


codec_of(_TypedHeader)  # in custom_header's table, as a Method's classes are


class _CommandSub(RemotingCommand):
    """A subclass: the twin leaves it to the pure function (which asks it for its frame)."""

    __slots__ = ()

    def encode_frame(self) -> bytes:
        return b"own frame"


@given(
    commands(),
    st.booleans(),  # a subclass
    st.sampled_from([None, "keep", 7, "x", object()]),  # a field of any type (no validation)
    st.sampled_from([a.name for a in attrs.fields(RemotingCommand)]),
)
def test_build_command_differential(cmd, sub, odd, field):
    """The builders' one way (its twin fills RemotingCommand's slots directly): the same
    command, every field as given (values the builders do not check included), a
    subclass built by its ``__init__``; what the command holds is referenced once."""
    fields = attrs.asdict(cmd, recurse=False)
    if odd != "keep":
        fields[field] = odd
    marker = object()  # its references say whether the twin's command keeps exactly one
    if field != "custom_header":
        fields["custom_header"] = marker
    cls = _CommandSub if sub else RemotingCommand
    args = (cls, *(fields[name] for name in attrs.fields_dict(RemotingCommand)))
    built = [accel.pure("build_command")(*args)]
    if accel.ACTIVE:
        built.append(_accel.build_command(*args))
    for made in built:
        assert type(made) is cls
        for name, value in fields.items():
            assert getattr(made, name) is value, name
    assert built[-1] == built[0]
    del made
    if accel.ACTIVE and field != "custom_header":
        before = sys.getrefcount(marker)
        del built[-1]
        gc.collect(0)  # (the youngest generation, where this example's objects are: a full one costs 0.1 s)
        assert sys.getrefcount(marker) == before - 1


_RESPONSE_KEYWORDS = ("body", "ext_fields", "opaque", "version", "language", "serialize_type")


_REPLY_PARTS = st.one_of(st.none(), st.integers(), text, st.binary(max_size=8), st.tuples(st.integers()))


@settings(max_examples=60)
@given(_REPLY_PARTS, st.binary(max_size=8), _REPLY_PARTS, st.binary(max_size=8), st.booleans())
def test_reply_differential(header, body, other_header, other_body, default_body):
    """remoting's ``Reply`` (an attrs class; its twin a C class): the same fields, default
    body, repr, equality (by fields, only with its own class), no hash, match args."""
    from trocket.remoting.rpc import Reply

    classes = [accel.pure("Reply")] + ([_accel.Reply] if accel.ACTIVE else [])
    assert Reply is classes[-1]
    seen = []
    for cls in classes:
        made = cls(header) if default_body else cls(header, body)
        other = cls(other_header, other_body)
        want_body = b"" if default_body else body
        assert made.header is header and made.body is want_body
        assert cls(header, body=want_body) == made and not (cls(header, body=want_body) != made)
        assert cls.__match_args__ == ("header", "body")
        assert cls[int] is not None
        with pytest.raises(TypeError):
            hash(made)
        seen.append((repr(made), made == other, made != other, made == (header, want_body), made != None))  # noqa: E711
        made.header, made.body = other_header, other_body
        assert made == other
    assert len(set(seen)) == 1, seen



@given(
    commands(),
    st.booleans(),  # a subclass
    st.integers(0, 2),  # remark and header: none given, by position, by keyword
    st.sets(st.sampled_from(_RESPONSE_KEYWORDS)),  # the keywords given (the rest: defaults)
    st.sampled_from([None, "keep", 7, "x"]),  # a value of any type for one of them
)
def test_response_command_differential(cmd, sub, positional, given_keywords, odd):
    """``RemotingCommand.response`` (response_command; its twin takes the keywords in
    C): the same command from both paths, every given value as given, the defaults
    the pure signature's, the response flag set; a subclass built by its ``__init__``."""
    assert RemotingCommand.response.__func__ is command_module.response_command
    values = attrs.asdict(cmd, recurse=False)
    kwargs = {name: values[name] for name in sorted(given_keywords)}
    if odd != "keep" and kwargs:
        kwargs[min(kwargs)] = odd
    args: tuple = (cmd.code,)
    if positional == 1:
        args += (cmd.remark, cmd.custom_header)
    elif positional == 2:
        kwargs.update(remark=cmd.remark, header=cmd.custom_header)
    cls = _CommandSub if sub else RemotingCommand
    built = [accel.pure("response_command")(cls, *args, **kwargs)]
    if accel.ACTIVE:
        built.append(_accel.response_command(cls, *args, **kwargs))
    defaults = {"remark": None, "custom_header": None, "body": b"", "ext_fields": None, "opaque": 0, "version": 0,
                "language": LanguageCode.JAVA, "serialize_type": SerializeType.JSON}
    for made in built:
        assert type(made) is cls
        assert made.code is cmd.code and made.flag == 1
        for name, default in defaults.items():
            given_value = kwargs.get("header" if name == "custom_header" else name, default)
            if positional == 1 and name in ("remark", "custom_header"):
                given_value = getattr(cmd, name)
            assert getattr(made, name) is given_value or (given_value == default and getattr(made, name) == default), name
    assert built[-1] == built[0]
    assert cls.response(*args, **kwargs) == built[0]


@needs_accel
@given(
    commands(),
    st.sampled_from(["keep", None, bytearray(b"ba"), memoryview(b"mv"), "text"]),  # body
    st.sampled_from(["keep", 0, 1, 2, None]),  # serialize type: plain ints, unknown
    st.none() | header_objects(fast._V2) | header_objects(_TypedHeader),  # a custom header, merged into the ext fields
    st.booleans(),  # the ext fields dropped (a custom header alone)
    st.integers(-(2**33), 2**33) | st.none(),  # code
    st.booleans(),  # a subclass
)
def test_encode_command_differential(cmd, body, stype, header, alone, code, sub):
    """The whole-frame twin: the same frame, or the pure function's own error, for what
    a command holds (a custom header merged) and for what it should not (bodies that are
    not bytes, serialize types that are plain ints or unknown, codes out of range, a
    subclass that encodes itself)."""
    assert same("encode_command", cmd)[0] == "ok"  # what a command holds encodes
    if body != "keep":
        cmd.body = body
    if stype != "keep":
        cmd.serialize_type = stype
    if code is not None:
        cmd.code = code
    cmd.custom_header = header
    if alone:
        cmd.ext_fields = None
    same("encode_command", cmd)
    if sub:
        same("encode_command", _CommandSub(**attrs.asdict(cmd, recurse=False)))


def test_encode_command_frames_a_big_body_in_one_piece(impl):
    cmd = RemotingCommand(code=11, opaque=3, flag=1, body=bytes(range(256)) * 4096, serialize_type=SerializeType.ROCKETMQ)
    frame = impl.encode_command(cmd)
    assert frame == accel.pure("encode_command")(cmd)
    assert struct.unpack_from(">iI", frame) == (len(frame) - 4, (1 << 24) | (len(frame) - 8 - len(cmd.body)))
    assert frame.endswith(cmd.body)


@needs_accel
@given(header_objects(fast._V2))
def test_send_header_v2_encode_differential(o):
    same_encoded("encode_send_message_v2", o)


@needs_accel
@given(header_objects(fast._PQ))
def test_pull_header_encode_differential(o):
    same_encoded("encode_pull_message", o)


def test_request_header_encoders_round_trip(impl):
    """What a client sends: the generic path's dict, in its order, and back to the object."""
    from trocket.codecs.custom_header import generic_decode, generic_encode

    v2 = fast._V2(a="g", b="T", c="TBW102", d=4, e=3, f=0, g=1700000000123, h=7, i="TAGS\x01t\x02",
                  j=None, k=True, l=16, m=False, n="broker-a", bname=None)
    pull = fast._PQ(consumerGroup="cg", topic="T", queueId=1, queueOffset=2**40, maxMsgNums=32, sysFlag=2,
                    commitOffset=-1, suspendTimeoutMillis=15000, subscription=None, subVersion=1700000000123,
                    expressionType="TAG", bname="b")
    for o, encode in ((v2, impl.encode_send_message_v2), (pull, impl.encode_pull_message)):
        ext = encode(o)
        assert list(ext.items()) == list(generic_encode(o).items())
        assert generic_decode(type(o), ext) == o
    ext = impl.encode_send_message_v2(v2)
    assert (ext["k"], ext["m"], ext["g"], "j" in ext, "bname" in ext) == ("true", "false", "1700000000123", False, False)


hosts = st.tuples(st.sampled_from(["127.0.0.1", "10.0.0.255", "::1", "bad", "1.2.3.4"]),
                  st.integers(-1, 70000))
ints = st.integers(-(2**33), 2**33) | st.integers(-(2**64), 2**64)


@needs_accel
@given(
    st.integers(0, 400), st.integers(-3, 200),
    st.one_of(st.binary(max_size=140), text), st.binary(max_size=200),
    st.one_of(st.binary(max_size=40), text, st.dictionaries(text, text, max_size=2)),
    st.fixed_dictionaries({}, optional={
        "queue_id": ints, "flag": ints, "queue_offset": ints, "physical_offset": ints,
        "sys_flag": st.integers(0, 0x40) | ints, "born_timestamp": ints, "store_timestamp": ints,
        "reconsume_times": ints, "prepared_transaction_offset": ints, "body_crc": st.none() | ints,
        "born_host": hosts, "store_host": hosts,
    }),
)
def test_record_encode_differential(size, offset, topic, body, props, kwargs):
    bufs = [bytearray(size), bytearray(size)]
    results = [
        outcome(fn, buf, offset, topic=topic, body=body, properties=props, **kwargs)
        for fn, buf in zip((accel.pure("encode_record_into"), _accel.encode_record_into), bufs)
    ]
    assert results[0] == results[1]
    assert bufs[0] == bufs[1]


@needs_accel
@given(
    st.sampled_from([0, 0, 0, 1, -1]) | st.integers(-400, 400) | st.just(2**40) | st.just("x"),
    st.one_of(st.binary(max_size=140), text), st.binary(max_size=200) | text,
    st.one_of(st.binary(max_size=40), text, st.dictionaries(text, text, max_size=2)),
    st.tuples(ints, ints, st.integers(0, 0x40) | ints, ints, hosts, hosts, ints, ints),
)
def test_store_record_differential(delta, topic, body, props, values):
    """The store's positional record builder: the record's own size (plus ``delta``:
    a size that is not the record's goes to the pure function in both paths)."""
    queue_id, flag, sys_flag, born_ts, born_host, store_host, reconsume, prepared = values
    fields = (topic, body, props, queue_id, flag, sys_flag, born_ts, born_host, store_host, reconsume, prepared)
    probe = outcome(record.encode_record_into, bytearray(1 << 12), 0, topic=topic, body=body, properties=props,
                    queue_id=queue_id, flag=flag, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host,
                    store_host=store_host, reconsume_times=reconsume, prepared_transaction_offset=prepared)
    size = probe[1] + delta if probe[0] == "ok" and type(delta) is int else delta
    assert outcome(accel.pure("encode_store_record"), size, *fields) == outcome(
        _accel.encode_store_record, size, *fields
    )


@needs_accel
@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_decoded_ext_field_names_are_interned(serialize):
    """The compiled decoders hand back interned field names (the send processor's
    lookups then match them by identity); the one-letter names of V2 included."""
    cmd = RemotingCommand(code=310, ext_fields={"a": "PG", "b": "T", "properties": "x"}, serialize_type=serialize)
    for _ in range(2):  # the first decode fills the cache, the second reads it
        ext = _accel.decode_command(encode_command(cmd)[4:]).ext_fields
        assert ext == {"a": "PG", "b": "T", "properties": "x"}
        assert all(key is sys.intern(key) for key in ext)


@needs_accel
@given(st.text(max_size=80) | st.sampled_from(["", "polygenelubricants", "T#" + "z" * 200, "\U0001f600#k"])
       | st.binary(max_size=8) | st.none())
def test_java_string_hash_differential(value):
    got = same("java_string_hash", value)
    if isinstance(value, str) and value.isascii():  # String.hashCode, unsigned
        h = 0
        for ch in value:
            h = (31 * h + ord(ch)) % 2**32
        assert got == ("ok", h)


@needs_accel
@given(
    st.lists(st.tuples(st.sampled_from(["TAGS", "WAIT", "CLUSTER", "UNIQ_KEY", "KEYS", "Aa", "BB", "REAL_QID", "é"])
                       | text, st.sampled_from(["v", "true", "a\x01b", "ü"]) | text), max_size=60),
    st.sampled_from([16, 32, 64, 128, 1 << 30]) | st.integers(min_value=-2, max_value=100) | st.none(),
)
def test_hashmap_properties_differential(items, capacity):
    """HashMap order (bucket, then insertion) at any capacity; up to 48 ASCII items compiled,
    the rest (more items, non-ASCII, a capacity that is no power of two) the pure path's."""
    d = dict(items)
    got = same("hashmap_properties", d, capacity)
    if got[0] == "ok" and capacity in (16, 32, 64, 128):
        m = JavaHashMap(d.items())
        if m._capacity == capacity:
            assert got[1] == "\x02".join(f"{k}\x01{d[k]}" for k in m)


@needs_accel
@settings(max_examples=400)
@given(
    st.lists(st.sampled_from([b"A\x01a", b"B\x01b", b"C\x01", b"", b"BB\x01x", b"X\x01B\x01y", b"\x01", b"B",
                              b"\xff\x01\xfe", b"REAL_TOPIC\x01T"]), max_size=70),
    st.booleans(),
    st.sampled_from([frozenset({b"B"}), frozenset({b"B", b"C", b""}), frozenset(), frozenset({b"REAL_TOPIC"}),
                     frozenset({bytes([i]) for i in range(9)}), frozenset({"B"}), {b"B"}, (b"B",)]),
    st.sampled_from([bytes, bytearray]),
)
def test_without_properties_bytes_differential(items, trailing, drop, kind):
    """Up to 64 kept items and 8 bytes keys in a frozenset compiled; the rest the pure path's."""
    data = kind(b"\x02".join(items) + (b"\x02" if trailing else b""))
    got = same("without_properties_bytes", data, drop)
    if got[0] == "ok" and isinstance(drop, frozenset) and kind is bytes and all(type(d) is bytes for d in drop):
        assert (got[1] is data) == (got[1] == data)  # nothing cut: the same object


_SIGN_NAMES = ["AccessKey", "a", "b", "i", "Signature", "_UNIQUE_KEY_QUERY", "é"]


@needs_accel
@settings(max_examples=300)
@given(
    st.dictionaries(st.sampled_from(_SIGN_NAMES) | text,
                    st.text(max_size=80) | st.sampled_from(["", "SendPath", "TAGS\x01é\x02", "\ud800"]) | st.none(),
                    max_size=8),
    st.binary(max_size=300) | st.none() | st.builds(bytearray, st.binary(max_size=70))
    | st.sampled_from([b"y" * 2048, b"y" * 2049]),  # the compiled SHA-1's limit, and past it OpenSSL's
    st.binary(min_size=1, max_size=80),
    st.sampled_from(["right", "wrong", "short", "none", "non-ascii", "bytes"]),
    st.sampled_from(["sorted", "missing", "extra", "unsorted"]),
)
def test_signature_matches_differential(ext, body, secret, which, names):
    """The broker's signature check (codecs/acl.py) on both paths: any field set, value
    type (a lone surrogate, None), body type, key length (over 64 bytes: hashed first)
    and signature; a right signature is what the signer (``verifying_signature``) computes."""
    from trocket.codecs.acl import SigningKey, verifying_signature

    signed = tuple(k for k in sorted(ext) if k not in ("Signature", "_UNIQUE_KEY_QUERY"))
    if names == "missing" and signed:
        signed = signed[1:]
    elif names == "extra":
        signed += ("not-there",)
    elif names == "unsorted":
        signed = signed[::-1]
    try:
        right = verifying_signature(ext, body, secret)
    except (TypeError, UnicodeError):
        right = "x" * 28
    signature = {
        "right": right, "wrong": right[:-2] + ("A=" if right[-2] != "A" else "B="), "short": right[:10],
        "none": None, "non-ascii": "é" * 28, "bytes": right.encode(),
    }[which]
    got = same("signature_matches", ext, signed, body, SigningKey(secret), signature)
    if which == "right" and names == "sorted" and got[0] == "ok":
        assert got[1] is True


@settings(max_examples=200)
@given(
    st.sampled_from(["right", "wrong", "no-key", "other-key", "other-topic", "no-topic", "no-signature",
                     "extra-name", "not-dict", "none"]),
    st.sampled_from(["set", "frozenset", "empty"]),
    st.sampled_from([None, "app"]),  # the session's account (None: none checked yet)
    st.binary(max_size=200) | st.none(),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
)
def test_send_signature_matches_differential(case, topics_kind, access_key, body, extra):
    """The broker's send-path check (account, topic, signature in one call) on both paths:
    a signed send as a session expects it, and each way it can differ from that (a
    field missing or changed, another name, a wrong signature, a mapping that is not a
    dict, no fields at all); True only for the right one."""
    from trocket.codecs.acl import SigningKey, verifying_signature

    secret = b"app-secret"
    ext = {"AccessKey": "app", "a": "G", "b": "Orders", "i": extra}
    ext["Signature"] = verifying_signature(ext, body, secret)
    signed = ("AccessKey", "a", "b", "i")
    if case == "wrong":
        ext["Signature"] = ext["Signature"][:-2] + ("A=" if ext["Signature"][-2] != "A" else "B=")
    elif case == "no-key":
        del ext["AccessKey"]
    elif case == "other-key":
        ext["AccessKey"] = "other"
    elif case == "other-topic":
        ext["b"] = "Payments"
    elif case == "no-topic":
        del ext["b"]
    elif case == "no-signature":
        del ext["Signature"]
    elif case == "extra-name":
        ext["z"] = "1"
    fields = None if case == "none" else MappingProxyType(ext) if case == "not-dict" else ext
    topics = {"set": {"Orders", "Other"}, "frozenset": frozenset({"Orders"}), "empty": set()}[topics_kind]
    got = same("send_signature_matches", fields, access_key, topics, signed, body, SigningKey(secret))
    expected = case in ("right", "not-dict") and topics_kind != "empty" and access_key == "app"
    assert got == ("ok", expected)


@needs_accel
@pytest.mark.parametrize("engine", ["sha-ni", "portable"])
def test_signature_matches_both_sha1_engines(engine):
    """The compiled check's two SHA-1 compressions (the CPU's SHA extensions and the
    portable one) against ``hmac`` on bodies of every length around the block edges and
    keys short, block-long and longer than a block, signed values shorter and longer than
    what the compiled check gathers before hashing; SHA-NI is skipped where the CPU lacks it."""
    import base64
    import hashlib
    import hmac
    import random

    from trocket.codecs.acl import SigningKey

    before = _accel._sha1_engine()
    try:
        if _accel._sha1_engine(engine) != engine:
            pytest.skip("this CPU has no SHA extensions")
        rng = random.Random(7)
        for n in list(range(0, 200)) + [2047, 2048]:
            secret = rng.randbytes(rng.choice([1, 16, 64, 65, 100]))
            # values short (gathered into one update) and past the 512 bytes gathered
            ext = {"a": "x" * rng.choice([rng.randrange(0, 70), rng.randrange(440, 600)]), "b": "TopicTest",
                   "Signature": ""}
            body = rng.randbytes(n) if n else None
            content = (ext["a"] + ext["b"]).encode() + (body or b"")
            right = base64.b64encode(hmac.new(secret, content, hashlib.sha1).digest()).decode()
            ext["Signature"] = right
            assert _accel.signature_matches(ext, ("a", "b"), body, SigningKey(secret), right) is True
            wrong = right[:3] + ("B" if right[3] == "A" else "A") + right[4:]
            assert _accel.signature_matches(ext, ("a", "b"), body, SigningKey(secret), wrong) is False
    finally:
        _accel._sha1_engine(before)


@needs_accel
@given(
    st.lists(st.tuples(st.sampled_from(["TAGS", "WAIT", "DELAY", "K", "", "é"]) | text,
                       st.sampled_from(["", "v", "true", "a\x01b"]) | text), max_size=5),
    st.sampled_from(["TAGS", "WAIT", "DELAY", "K", "", "é", "A\x01", "\x02"]),
    st.sampled_from(["str", "bytes", "bytearray", "bad-bytes"]),
    st.booleans(),
)
def test_get_property_differential(items, key, kind, trailing):
    props = "\x02".join(f"{k}\x01{v}" for k, v in items) + ("\x02" if trailing else "")
    data = {
        "str": props,
        "bytes": props.encode(),
        "bytearray": bytearray(props.encode()),
        "bad-bytes": props.encode() + b"\xff" + f"\x02{key}\x01\xfe".encode("latin-1", "replace"),
    }[kind]
    got = same("get_property", data, key)
    same("get_property", None, key)
    if kind == "str" and key and "\x01" not in key and "\x02" not in key:  # the map's reading
        assert got == ("ok", accel.pure("decode_properties")(data).get(key))
    if kind == "str":
        same("decode_properties", data)
        same("decode_properties", data.encode("ascii", "replace").decode())


@needs_accel
@given(
    st.lists(st.tuples(st.sampled_from(["TAGS", "WAIT", "CLUSTER", "UNIQ_KEY", "KEYS", "Aa", "BB", "", "é"]) | text,
                       st.sampled_from(["", "v", "true", "a\x01b"]) | text), max_size=40),
    st.sampled_from(["DefaultCluster", "c", "", "é"]),
    st.booleans(),
)
def test_send_properties_differential(items, cluster, trailing):
    props = "\x02".join(f"{k}\x01{v}" for k, v in items) + ("\x02" if trailing else "")
    got = same("send_properties", props, cluster)
    if got[0] == "ok":
        stored, tags, wait = got[1]
        m = JavaHashMap.from_properties(props)
        assert tags == properties.tags_code(m.get("TAGS")) and wait == m.get("WAIT")
        assert "WAIT" not in [item.partition("\x01")[0] for item in stored.decode().split("\x02")]


def test_send_properties_as_javas_broker(impl):
    """The string Java 4.9.8's broker stored for a Java 4.9.8 producer's single send (the
    Java reference suite, test_stored_properties_are_javas): CLUSTER put in its bucket's
    place, WAIT gone, TAGS kept for the tag hash."""
    sent = ("mode\x01single\x02zeta\x01z\x02uni\x01\u00fc\u20ac\u00df\x02KEYS\x01k_single_0 kk_single\x02idx\x010"
            "\x02UNIQ_KEY\x01FD000000000000000000000000000002041C5FFD2B27847F5CB70001\x02WAIT\x01true\x02TAGS\x01Tag_single")
    stored = ("mode\x01single\x02zeta\x01z\x02uni\x01\u00fc\u20ac\u00df\x02KEYS\x01k_single_0 kk_single\x02idx\x010"
              "\x02UNIQ_KEY\x01FD000000000000000000000000000002041C5FFD2B27847F5CB70001\x02CLUSTER\x01DefaultCluster"
              "\x02TAGS\x01Tag_single")
    tag_single = -1924612947  # Java's "Tag_single".hashCode()
    assert impl.send_properties(sent, "DefaultCluster") == (stored.encode(), tag_single, "true")
    ascii_sent = sent.replace("\u00fc\u20ac\u00df", "u")
    assert impl.send_properties(ascii_sent, "DefaultCluster") == (stored.replace("\u00fc\u20ac\u00df", "u").encode(),
                                                                   tag_single, "true")
    # the C++ client's: sorted keys, a trailing separator; CLUSTER already there keeps its place
    assert impl.send_properties("KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01U\x02WAIT\x01true\x02", "C") == (
        b"KEYS\x01k\x02UNIQ_KEY\x01U\x02CLUSTER\x01C\x02TAGS\x01t", 116, "true")
    assert impl.send_properties("CLUSTER\x01old\x02a\x01b", "new") == (b"a\x01b\x02CLUSTER\x01new", 0, None)
    assert impl.send_properties("", "DefaultCluster") == (b"CLUSTER\x01DefaultCluster", 0, None)
    # WAIT as the map reads it: the last non-empty value; the producer's own spelling
    assert impl.send_properties("WAIT\x01false\x02TAGS\x01\x02WAIT\x01FALSE\x02WAIT\x01", "C") == (
        b"CLUSTER\x01C", 0, "FALSE")
    with pytest.raises(MessageEncodeError):
        impl.send_properties("k\x01\udfff", "C")


def test_properties_through_the_bytes_reader(impl):
    assert impl.decode_properties("") == {}
    assert impl.decode_properties("A\x01b\x02\x02=\x01\x02C\x01d\x01e\x02A\x01z\x02") == {"A": "z", "C": "d\x01e"}
    assert impl.decode_properties("é\x01ü") == {"é": "ü"}
    assert properties.decode_properties_bytes(b"K\x01v\x02W\x01true") == {"K": "v", "W": "true"}


chunk_lists = st.lists(
    st.one_of(
        st.binary(max_size=12),
        st.builds(lambda n, body: n.to_bytes(4, "big", signed=True) + body,
                  st.integers(-2, 40) | st.sampled_from([2**31 - 1, 1 << 20]), st.binary(max_size=40)),
        st.sampled_from([b"GET ", b"\x16\x03\x01", b"PRI ", b"SSH-2.0", b"\x00\x00\x00\x04\x00\x00\x00\x00"]),
    ),
    max_size=8,
)


def drive(cls, chunks, max_len, sniff):
    """Everything a decoder says about a chunk sequence: frames, errors, buffered."""
    log = []
    try:
        decoder = cls(max_len, sniff=sniff)
    except Exception as exc:
        return [("init", type(exc), str(exc))]
    log.append(decoder.max_frame_length)
    for chunk in chunks:
        log.append(outcome(decoder.feed, chunk))
        log.append(outcome(lambda: list(decoder)))
        log.append(outcome(decoder.next_frame))
        log.append(decoder.buffered)
    log.append(outcome(decoder.close))
    log.append(outcome(decoder.next_frame))
    return log


@needs_accel
@given(chunk_lists, st.sampled_from([3, 4, 8, 64, 1 << 20, 2**40]), st.booleans())
def test_frame_decoder_differential(chunks, max_len, sniff):
    assert drive(accel.pure("FrameDecoder"), chunks, max_len, sniff) == drive(
        _accel.FrameDecoder, chunks, max_len, sniff
    )


def test_fallback_keeps_the_pure_error():
    """A header the twin does not take goes to the pure function: its typed error."""
    raw = struct.pack(">hBhiii", 1, 99, 0, 0, 0, 0) + struct.pack(">i", 0)
    kind, exc_type, message = same("decode_binary_header", raw)
    assert kind == "error" and "unknown language code 99" in message
    assert same("decode_json_header", b'{"code":1.5}')[0] == "error"
    assert same("decode_command", b"\x00\x00\x00")[0] == "error"
    cmd = RemotingCommand(code=1)
    assert same("decode_command", b"\x05" + encode_command(cmd)[5:])[0] == "error"


@needs_accel
def test_twins_take_real_traffic_themselves():
    """Real clients' requests never reach the pure fallback (else the twin would be no
    faster than the reference while every test still passed)."""

    def no_fallback(*args, **kwargs):
        raise AssertionError("handed to the pure function")

    frames = [GOLDEN / "send_message_v2__JSON.bin", GOLDEN / "send_message_v2__ROCKETMQ.bin",
              *sorted((GOLDEN / "captures").rglob("*c_request*.bin"))]
    try:
        for name in NAMES:
            _accel.set_pure(name, no_fallback)
        for path in frames:
            payload = path.read_bytes()[4:]
            cmd = _accel.decode_command(payload)
            if cmd.code == 310:
                _accel.decode_send_message_v2(cmd.ext_fields)
        cmd = _accel.decode_json_header(CPP_SEND)
        _accel.decode_send_message(cmd.ext_fields)
        buf = bytearray(300)
        _accel.encode_record_into(buf, 0, topic=b"T", body=b"x" * 128, properties=b"TAGS\x01a\x02WAIT\x01true",
                                  born_host=("127.0.0.1", 4000), store_host=("127.0.0.1", 10911))
        assert _accel.get_property(b"TAGS\x01a\x02WAIT\x01true", "WAIT") == "true"
        for path in frames:  # what a trocket client writes for them
            cmd = _accel.decode_command(path.read_bytes()[4:])
            assert _accel.encode_binary_header(cmd, cmd.ext_fields)
        assert _accel.decode_properties("TAGS\x01a\x02WAIT\x01true\x02") == {"TAGS": "a", "WAIT": "true"}
    finally:
        for name in NAMES:
            _accel.set_pure(name, accel.pure(name))


def test_trocket_pure_forces_the_pure_path():
    import subprocess
    import sys

    code = (
        "import types; from trocket.codecs import accel, serialize, frame\n"
        "print(accel.ACTIVE, type(serialize.decode_command) is types.FunctionType,"
        " frame.FrameDecoder is accel.pure('FrameDecoder'), accel.REASON)"
    )
    env = dict(os.environ, TROCKET_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False True True TROCKET_PURE is set"


@needs_accel
def test_a_stale_build_is_refused(monkeypatch):
    """An editable install's .so older than the twins' contract is not used."""
    monkeypatch.delenv("TROCKET_PURE", raising=False)
    monkeypatch.setattr(accel, "ABI", accel.ABI + 1)
    module, reason = accel._load()
    assert module is None and reason.startswith("stale build")


# -- place_record (the commit log's append under its lock) -------------------------------


def _placed(impl, pos: int, size: int, queue_offset: int, phys: int, ts_at: int, ts: int, view_len: int = 1024):
    rec = bytearray(size)
    record.encode_record_into(rec, 0, topic=b"T", body=b"x" * (size - 92), properties=b"", store_host=("127.0.0.1", 10911))
    target = bytearray(b"\xee" * view_len)
    return outcome(impl.place_record, memoryview(target), pos, rec, size, queue_offset, phys, ts_at, ts), bytes(target), bytes(rec)


def test_place_record_writes_the_record_with_its_offsets(impl):
    (kind, _), target, rec = _placed(impl, 100, 220, 7, 1 << 40, record.OFFSET_STORE_TIMESTAMP, 1700000000123)
    assert kind == "ok"
    assert target[100:320] == rec and target[:100] == b"\xee" * 100 and target[320:] == b"\xee" * (1024 - 320)
    msg, _ = record.decode_record(target, 100)
    assert (msg.queue_offset, msg.commit_log_offset, msg.store_timestamp) == (7, 1 << 40, 1700000000123)


@needs_accel
@given(st.integers(-2, 900), st.integers(0, 400), ints, ints, st.integers(-10, 400), ints)
def test_place_record_differential(pos, size, queue_offset, phys, ts_at, ts):
    """Same target bytes, same record, same error on both paths (out-of-range values,
    a record that does not fit: the pure path's own error, or its bytes)."""
    size = max(size, 92)
    pure = _placed(SimpleNamespace(place_record=accel.pure("place_record")), pos, size, queue_offset, phys, ts_at, ts)
    fast = _placed(_accel, pos, size, queue_offset, phys, ts_at, ts)
    assert fast == pure


# -- dispatch_fields (what a slave and recovery read of every record) --------------------


def _stored(topic: bytes, body: bytes, props: bytes, born: tuple, store: tuple, prefix: int = 0) -> bytes:
    sys_flag = (0x10 if ":" in born[0] else 0) | (0x20 if ":" in store[0] else 0)  # the hosts' IPv6 bits
    buf = bytearray(prefix + record.record_size(len(body), len(topic), len(props), sys_flag))
    record.encode_record_into(
        buf, prefix, topic=topic, body=body, properties=props, sys_flag=sys_flag, queue_id=3, queue_offset=1 << 35,
        physical_offset=(1 << 40) + 7, store_timestamp=1700000000123, born_host=born, store_host=store,
    )
    return bytes(buf)


def test_dispatch_fields_are_the_records_fields(impl):
    raw = _stored(b"TopicTest", b"x" * 128, "TAGS\x01tä\x02KEYS\x01k".encode(), ("10.0.0.1", 5), ("::1", 10911), prefix=5)
    fields = impl.dispatch_fields(raw, 5)
    msg, _ = record.decode_record(raw, 5)
    assert fields == (msg.store_size, "TopicTest", 3, 1 << 35, (1 << 40) + 7, msg.sys_flag, 1700000000123, "TAGS\x01tä\x02KEYS\x01k")
    assert impl.dispatch_fields(memoryview(raw)[5:], check_crc=True) == fields
    with pytest.raises(MessageDecodeError, match="properties are not valid UTF-8"):
        impl.dispatch_fields(_stored(b"T", b"", b"A\x01\xff", ("1.2.3.4", 1), ("1.2.3.4", 2)))
    with pytest.raises(MessageDecodeError, match="BODYCRC"):
        bad = bytearray(raw)
        bad[-40] ^= 1  # a body byte
        impl.dispatch_fields(bad, 5, check_crc=True)


@needs_accel
@given(
    st.binary(max_size=12), st.binary(max_size=60), st.binary(max_size=30),
    st.sampled_from([("127.0.0.1", 1), ("::1", 2), ("1.2.3.4", 65535)]),
    st.sampled_from([("127.0.0.1", 10911), ("fe80::1", 3)]),
    st.integers(0, 3), edits, cuts, st.booleans(),
)
def test_dispatch_fields_differential(topic, body, props, born, store, prefix, edited, cut, crc):
    """Whole records, then records with bytes changed or cut off (sizes, magic, topic,
    ports, UTF-8): the same fields or the same error on both paths."""
    raw = _stored(topic, body, props, born, store, prefix)
    same("dispatch_fields", raw, prefix, check_crc=crc)
    same("dispatch_fields", mutate(raw, [(prefix + at, b) for at, b in edited], cut), prefix, check_crc=crc)
    same("dispatch_fields", raw, -1)


# -- index_records (the index's keys of every stored record) ----------------------------

_KEY_WORDS = st.sampled_from(["", " ", "k1", "k1 k2", " a  b ", "x" * 40, "ä", "\x01", "#"])


@st.composite
def _keyed_records(draw):
    """Records with UNIQ_KEY/KEYS items (repeated, empty, spaced, non-ASCII), rolled-back
    ones, a topic now and then non-ASCII; optionally a blank tail or garbage after them."""
    out = bytearray()
    for i in range(draw(st.integers(0, 5))):
        items = draw(st.lists(st.tuples(st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "UNIQ_KEYS", "K"]), _KEY_WORDS),
                              max_size=4))
        props = "\x02".join(f"{k}\x01{v}" for k, v in items).encode()
        topic = draw(st.sampled_from([b"T", b"TopicTest", "tä".encode()]))
        sys_flag = draw(st.sampled_from([0, 0, 4, 8, 12]))
        size = record.record_size(3, len(topic), len(props), sys_flag)
        at = len(out)
        out += bytes(size)
        record.encode_record_into(
            out, at, topic=topic, body=b"abc", properties=props, sys_flag=sys_flag, queue_id=0, queue_offset=i,
            physical_offset=1000 + at, store_timestamp=draw(st.sampled_from([0, 1_700_000_000_000, 1_700_000_999_999])),
            born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2),
        )
    tail = draw(st.sampled_from(["", "blank", "garbage"]))
    if tail == "blank":
        at = len(out)
        out += bytes(16)
        record.encode_blank_into(out, at, 16)
    elif tail == "garbage":
        out += draw(st.binary(min_size=1, max_size=30))
    return bytes(out)


@needs_accel
@given(_keyed_records(), edits, st.integers(1, 7), st.integers(1, 12), st.integers(0, 20),
       st.sampled_from([[0, 0, 0, 0, 0, 1], [1_700_000_000_000, 1_700_000_000_000, 5, 5, 0, 1]]),
       st.binary(max_size=24), st.booleans())
def test_index_records_differential(log, edited, slot_num, index_num, max_records, header, junk, limit_short):
    """The same stop, counts, status, index bytes and header on both paths (or the same
    error) for records of every shape, a file filling up, slots holding junk (a killed
    put), records changed or cut (the limit short of the data)."""
    log = mutate(log, edited, None) if edited and log else log
    size = index_file.INDEX_HEADER_SIZE + slot_num * 4 + index_num * 20
    results = []
    for fn in (accel.pure("index_records"), _accel.index_records):
        index = bytearray(size)
        index[40:40 + len(junk)] = junk[: size - 40]
        hdr = list(header)
        limit = len(log) - 5 if limit_short else len(log)
        results.append((outcome(fn, log, 0, limit, index, slot_num, index_num, hdr, max_records), bytes(index), hdr))
    assert results[0] == results[1]


@needs_accel
@settings(max_examples=60)
@given(st.integers(1, 64), st.integers(2, 200), st.integers(1, 80), st.lists(_KEY_WORDS, min_size=1, max_size=6))
def test_index_records_differential_long_runs(slot_num, index_num, max_records, words):
    """Runs longer than the compiled path's queue of prefetched keys (16): the queue fills
    and is put, and a file filling up mid-run turns the queued puts into checked ones;
    the same index bytes, header and counts on both paths."""
    out = bytearray()
    for i in range(70):
        props = f"UNIQ_KEY\x01U{i}\x02KEYS\x01{words[i % len(words)]}".encode()
        size = record.record_size(3, 9, len(props), 0)
        at = len(out)
        out += bytes(size)
        record.encode_record_into(
            out, at, topic=b"TopicTest", body=b"abc", properties=props, sys_flag=0, queue_id=0, queue_offset=i,
            physical_offset=1000 + at, store_timestamp=1_700_000_000_000 + 700 * i,
            born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2),
        )
    log = bytes(out)
    size = index_file.INDEX_HEADER_SIZE + slot_num * 4 + index_num * 20
    results = []
    for fn in (accel.pure("index_records"), _accel.index_records):
        index = bytearray(size)
        hdr = [0, 0, 0, 0, 0, 1]
        first = outcome(fn, log, 0, len(log), index, slot_num, index_num, hdr, max_records)
        again = outcome(fn, log, 0, len(log), index, slot_num, index_num, hdr, max_records)  # into a fuller file
        results.append((first, again, bytes(index), hdr))
    assert results[0] == results[1]


def test_index_records_puts_javas_entries(impl):
    """Two records: the unique key and each KEYS entry under ``topic#key``, Java's hash
    and layout; a rolled-back record nothing; a file that cannot take a record's keys."""
    def stored(props: str, sys_flag: int = 0, ts: int = 1_700_000_002_500) -> bytes:
        buf = bytearray(record.record_size(1, 1, len(props), sys_flag))
        record.encode_record_into(buf, 0, topic=b"T", body=b"b", properties=props.encode(), sys_flag=sys_flag,
                                  queue_id=0, queue_offset=0, physical_offset=777, store_timestamp=ts,
                                  born_host=("127.0.0.1", 1), store_host=("127.0.0.1", 2))
        return bytes(buf)

    log = stored("UNIQ_KEY\x01U1\x02KEYS\x01a  b") + stored("KEYS\x01z", sys_flag=12)
    index = bytearray(40 + 8 * 4 + 6 * 20)
    header = [1_700_000_000_000, 0, 0, 0, 0, 1]
    assert impl.index_records(log, 0, len(log), index, 8, 6, header, 10) == (len(log), 2, 3, index_file.INDEX_DONE)
    hashes = [index_file.index_key_hash(k) for k in ("T#U1", "T#a", "T#b")]
    # the first put sets the begin time (after its own time difference was taken, as Java)
    assert header == [1_700_000_002_500, 1_700_000_002_500, 777, 777, len({h % 8 for h in hashes}), 4]
    entries = [struct.unpack_from(">iqii", index, 40 + 8 * 4 + i * 20) for i in (1, 2, 3)]
    assert [e[:3] for e in entries] == [(hashes[0], 777, 2), (hashes[1], 777, 0), (hashes[2], 777, 0)]
    assert struct.unpack_from(">qqqqii", index) == tuple(header)
    # three more keys do not fit the file's 2 entries left: FULL, nothing put
    assert impl.index_records(log, 0, len(log), index, 8, 6, header, 10) == (0, 0, 0, index_file.INDEX_FULL)


@pytest.mark.parametrize("header", [
    b'{"co\\u0064e":12,"opaque":3}',  # an escaped key: the pure decoder's reading
    b'{"code":12,"\xc3\xa9":1,"opaque":3}',  # a non-ASCII unknown key
    b'{"code":12,"\xff":1}',  # not UTF-8
    b'{"code":12,"code":13,"flag":0}',  # the last one wins
    b'{"cod":1,"codes":2,"extField":{},"version":7,"x\\n":1}',  # near misses are unknown keys
    b'{"code":12,"extFields":{"a":"1","b":null,"c":2,"d":true},"language":"CPP"}',
])
def test_json_header_keys_differential(header):
    """The compiled decoder matches the header's own keys on their bytes: the same outcome
    as the pure decoder for keys that are escaped, non-ASCII, repeated or near misses."""
    same("decode_json_header", header)


# -- offset_msg_id (the commit log's per-put message id) -----------------------------------


@settings(max_examples=300, deadline=None)
@given(
    host=st.one_of(st.sampled_from(["7F00000100002A9F", "", "0" * 40]), st.text(max_size=20)),
    offset=st.one_of(st.integers(0, 2**63 - 1), st.integers(-(2**70), 2**70)),
)
def test_offset_msg_id_differential(host, offset):
    """Both paths: the host part then the offset in 16 upper hex digits (the pure
    ``%016X``'s text for what the twin hands over: negative or wider offsets)."""
    pure = accel.pure("offset_msg_id")
    expected = pure(host, offset)
    assert expected == host + "%016X" % offset
    if accel.ACTIVE:
        assert _accel.offset_msg_id(host, offset) == expected


@pytest.mark.parametrize("ip,port,offset", [("127.0.0.1", 10911, 3), ("10.0.0.7", 1, 2**63 - 1), ("::1", 65535, 0)])
def test_offset_msg_id_is_the_encoded_id(impl, ip, port, offset):
    host = msgid.encode_offset_msg_id(ip, port, 0)[:-16]
    assert impl.offset_msg_id(host, offset) == msgid.encode_offset_msg_id(ip, port, offset)
