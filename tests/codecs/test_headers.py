"""Custom command headers: field rules, per-header checks, V1 <-> V2, golden frames."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import attrs
import pytest

from trocket.codecs import headers as H
from trocket.codecs.custom_header import (
    _java,
    decode_header,
    encode_header,
    field,
    generic_decode,
    generic_encode,
    has_fast_codec,
    header,
    header_fields,
    is_header_class,
)
from trocket.codecs.errors import CodecError, CustomHeaderError
from trocket.codecs.headers import REQUEST_HEADERS, RESPONSE_HEADERS, SendMessageRequestHeader, SendMessageRequestHeaderV2, fast

ALL_HEADERS = sorted(
    {getattr(H, name) for name in H.__all__ if is_header_class(getattr(H, name))}, key=lambda c: c.__name__
)
FAST_HEADERS = [cls for cls in ALL_HEADERS if has_fast_codec(cls)]
BOTH = [pytest.param(decode_header, id="dispatch"), pytest.param(generic_decode, id="generic")]

# -- sample values ------------------------------------------------------------------------

SAMPLE = {"str": "v", "int": 7, "long": 2**40, "bool": True, "double": 1.5}
SAMPLE_WIRE = {"str": "v", "int": "7", "long": str(2**40), "bool": "true", "double": "1.5"}


def full_ext(cls: type) -> dict[str, str]:
    """An ext map with every field of ``cls`` set to a valid value."""
    return {spec.name: SAMPLE_WIRE[spec.kind] for spec in header_fields(cls)}


def full_obj(cls: type) -> Any:
    return cls(**{spec.name: SAMPLE[spec.kind] for spec in header_fields(cls)})


def fields_of_kind(*kinds: str) -> list[Any]:
    return [
        pytest.param(cls, spec, id=f"{cls.__name__}.{spec.name}")
        for cls in ALL_HEADERS
        for spec in header_fields(cls)
        if spec.kind in kinds
    ]


REQUIRED = [
    pytest.param(cls, spec, id=f"{cls.__name__}.{spec.name}")
    for cls in ALL_HEADERS
    for spec in header_fields(cls)
    if spec.required
]

# -- Java scalar rules ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("0", 0),
        ("7", 7),
        ("-1", -1),
        ("+5", 5),
        ("-0", 0),
        ("007", 7),
        ("2147483647", 2**31 - 1),
        ("-2147483648", -(2**31)),
        ("0" * 5000 + "42", 42),  # Java skips any number of leading zeros
    ],
)
def test_parse_int32_accepts_what_integer_parseint_accepts(text: str, value: int) -> None:
    assert _java.parse_int32(text) == value


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "\t1", "1\n", "1_000", "+", "-", "+-1", "--1", "1.0", "0x10", "1e3",
     "٣", "²", "１", "2147483648", "-2147483649", "99999999999999999999", "1" * 5000, "true"],
)
def test_parse_int32_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        _java.parse_int32(text)


def test_parse_int64_range() -> None:
    assert _java.parse_int64("9223372036854775807") == 2**63 - 1
    assert _java.parse_int64("-9223372036854775808") == -(2**63)
    assert _java.parse_int64("2147483648") == 2**31
    for text in ["9223372036854775808", "-9223372036854775809", "1" * 20]:
        with pytest.raises(ValueError):
            _java.parse_int64(text)


@pytest.mark.parametrize(
    "text, value",
    [("true", True), ("TRUE", True), ("True", True), ("tRuE", True), ("1", True),
     ("false", False), ("FALSE", False), ("fAlSe", False), ("0", False)],
)
def test_parse_bool_forms(text: str, value: bool) -> None:
    assert _java.parse_bool(text) is value


@pytest.mark.parametrize("text", ["", "yes", "no", "t", "f", "2", "-1", "01", " true", "true ", "falſe", "on"])
def test_parse_bool_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        _java.parse_bool(text)


@pytest.mark.parametrize("value", [5, None, True, b"true"])
def test_parsers_reject_non_strings(value: Any) -> None:
    for parse in (_java.parse_int32, _java.parse_int64, _java.parse_bool, _java.parse_double):
        with pytest.raises(ValueError):
            parse(value)


@pytest.mark.parametrize(
    "text, value",
    [("1", 1.0), ("1.", 1.0), (".5", 0.5), ("-2.5", -2.5), ("+1.0", 1.0), ("1e5", 1e5), ("1.5E-3", 1.5e-3),
     ("2f", 2.0), ("3D", 3.0), ("1e400", math.inf), ("Infinity", math.inf), ("-Infinity", -math.inf)],
)
def test_parse_double(text: str, value: float) -> None:
    assert _java.parse_double(text) == value


@pytest.mark.parametrize("text", ["", " 1", "1 ", ".", "e5", "1e", "1e+", "0x1p3", "inf", "nan", "1_0", "١", "NaNf", "--1"])
def test_parse_double_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        _java.parse_double(text)


def test_parse_double_nan() -> None:
    assert math.isnan(_java.parse_double("NaN"))


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (3.14, "3.14"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1.5e-5, "1.5E-5"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (1234567.125, "1234567.125"),
        (123456789.0, "1.23456789E8"),
        (-2.5e10, "-2.5E10"),
        (1.5e300, "1.5E300"),
        (5e-324, "4.9E-324"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
    ],
)
def test_format_double_like_java(value: float, text: str) -> None:
    assert _java.format_double(value) == text


def test_format_double_round_trips() -> None:
    for x in [1 / 3, 2 / 3, 1e-3, 1e-3 - 1e-19, 1e7 - 1e-9, 6.02214076e23, 2.2250738585072014e-308]:
        assert _java.parse_double(_java.format_double(x)) == x


# -- declaring headers ---------------------------------------------------------------------


@header
class AllKinds:
    """A test-only header with every kind, required/optional, and defaults."""

    s: str = field("str", required=True)
    i: int = field("int", required=True)
    lg: int | None = field("long")
    b: bool = field("bool", default=False)
    d: float | None = field("double")
    flag: bool = field("bool", required=True, default=False)


def test_header_declares_specs_in_order() -> None:
    specs = header_fields(AllKinds)
    assert [s.name for s in specs] == ["s", "i", "lg", "b", "d", "flag"]
    assert [s.kind for s in specs] == ["str", "int", "long", "bool", "double", "bool"]
    assert [s.required for s in specs] == [True, True, False, False, False, True]
    assert attrs.has(AllKinds) and "__slots__" in AllKinds.__dict__


def test_header_classes_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        SendMessageRequestHeaderV2("g", "t", "c", 4, 0, 0, 0, 0)  # type: ignore[misc]


def test_header_rejects_plain_attributes_and_unknown_kinds() -> None:
    with pytest.raises(TypeError, match="field"):

        @header
        class Bad:
            x: int = attrs.field(default=0)

    with pytest.raises(ValueError, match="kind"):
        field("short")
    with pytest.raises(TypeError):
        generic_decode(int, {})
    with pytest.raises(TypeError):
        generic_encode(object())


def test_generic_all_kinds_round_trip() -> None:
    obj = AllKinds(s="x", i=-5, lg=2**62, b=True, d=0.25, flag=True)
    ext = generic_encode(obj)
    assert list(ext.items()) == [
        ("s", "x"), ("i", "-5"), ("lg", str(2**62)), ("b", "true"), ("d", "0.25"), ("flag", "true")
    ]
    assert generic_decode(AllKinds, ext) == obj
    # a class without a hand-written codec gets the one generated from its declaration
    assert encode_header(obj) == ext and decode_header(AllKinds, ext) == obj


def test_generic_defaults_and_omission() -> None:
    obj = generic_decode(AllKinds, {"s": "x", "i": "1", "flag": "0"})
    assert obj == AllKinds(s="x", i=1, lg=None, b=False, d=None, flag=False)
    # None fields are omitted; primitive-like defaults (False) are written, as Java does
    assert generic_encode(obj) == {"s": "x", "i": "1", "b": "false", "flag": "false"}


def test_required_with_default_is_still_required_on_the_wire() -> None:
    with pytest.raises(CustomHeaderError) as info:
        generic_decode(AllKinds, {"s": "x", "i": "1"})
    assert info.value.field == "flag"


def test_errors_come_in_declaration_order() -> None:
    # i is bad and flag is missing: i comes first
    with pytest.raises(CustomHeaderError) as info:
        generic_decode(AllKinds, {"s": "x", "i": "x1", "d": "nope"})
    assert info.value.field == "i"
    assert "'x1'" in info.value.reason


def test_bad_double_names_field_and_value() -> None:
    with pytest.raises(CustomHeaderError) as info:
        generic_decode(AllKinds, {"s": "x", "i": "1", "flag": "true", "d": "1,5"})
    assert (info.value.header, info.value.field) == ("AllKinds", "d")
    assert "'1,5'" in str(info.value)


# -- every header --------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_round_trip_every_header(cls: type) -> None:
    obj = full_obj(cls)
    ext = encode_header(obj)
    assert list(ext) == [spec.name for spec in header_fields(cls)]
    assert ext == generic_encode(obj) == full_ext(cls)
    assert decode_header(cls, ext) == obj == generic_decode(cls, ext)


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_unknown_ext_fields_are_ignored(cls: type) -> None:
    ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x=", **full_ext(cls), "TRACE_ON": "true"}
    assert decode_header(cls, ext) == full_obj(cls)


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls, spec", REQUIRED)
def test_missing_required_field_names_it(decode: Any, cls: type, spec: Any) -> None:
    for ext in ({k: v for k, v in full_ext(cls).items() if k != spec.name}, {**full_ext(cls), spec.name: None}):
        with pytest.raises(CustomHeaderError) as info:
            decode(cls, ext)
        err = info.value
        assert (err.header, err.field) == (cls.__name__, spec.name)
        assert err.reason == f"the custom field <{spec.name}> is null"
        assert isinstance(err, CodecError)


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_optional_fields_may_be_absent(decode: Any, cls: type) -> None:
    ext = {spec.name: SAMPLE_WIRE[spec.kind] for spec in header_fields(cls) if spec.required}
    obj = decode(cls, ext)
    for spec in header_fields(cls):
        if not spec.required:
            assert getattr(obj, spec.name) == spec.default


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls, spec", fields_of_kind("int", "long"))
@pytest.mark.parametrize("bad", ["abc", "", " 1", "1.5", "1_0", "0x1F", "٣"])
def test_bad_int_names_field_and_value(decode: Any, cls: type, spec: Any, bad: str) -> None:
    with pytest.raises(CustomHeaderError) as info:
        decode(cls, {**full_ext(cls), spec.name: bad})
    err = info.value
    assert (err.header, err.field) == (cls.__name__, spec.name)
    assert repr(bad) in err.reason


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls, spec", fields_of_kind("int"))
def test_int_fields_are_int32(decode: Any, cls: type, spec: Any) -> None:
    for good, value in [("2147483647", 2**31 - 1), ("-2147483648", -(2**31)), ("+12", 12), ("0012", 12)]:
        assert getattr(decode(cls, {**full_ext(cls), spec.name: good}), spec.name) == value
    for bad in ["2147483648", "-2147483649", "4294967296"]:
        with pytest.raises(CustomHeaderError, match="out of range") as info:
            decode(cls, {**full_ext(cls), spec.name: bad})
        assert info.value.field == spec.name


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls, spec", fields_of_kind("long"))
def test_long_fields_are_int64(decode: Any, cls: type, spec: Any) -> None:
    for good, value in [("2147483648", 2**31), ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63))]:
        assert getattr(decode(cls, {**full_ext(cls), spec.name: good}), spec.name) == value
    with pytest.raises(CustomHeaderError, match="out of range") as info:
        decode(cls, {**full_ext(cls), spec.name: "9223372036854775808"})
    assert info.value.field == spec.name


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls, spec", fields_of_kind("bool"))
def test_bool_fields(decode: Any, cls: type, spec: Any) -> None:
    for text, value in [("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False)]:
        assert getattr(decode(cls, {**full_ext(cls), spec.name: text}), spec.name) is value
    for bad in ["yes", "", "2", "t"]:
        with pytest.raises(CustomHeaderError) as info:
            decode(cls, {**full_ext(cls), spec.name: bad})
        assert (info.value.field, repr(bad) in info.value.reason) == (spec.name, True)


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
def test_no_ext_fields_at_all(decode: Any, cls: type) -> None:
    required = [spec.name for spec in header_fields(cls) if spec.required]
    if required:
        with pytest.raises(CustomHeaderError) as info:
            decode(cls, None)
        assert info.value.field == required[0]
    else:
        assert decode(cls, None) == cls()


@pytest.mark.parametrize("decode", BOTH)
@pytest.mark.parametrize("value", [5, True, 2.0])
def test_non_string_values_for_numeric_fields(decode: Any, value: Any) -> None:
    ext = {**full_ext(SendMessageRequestHeaderV2), "e": value}
    with pytest.raises(CustomHeaderError) as info:
        decode(SendMessageRequestHeaderV2, ext)
    assert info.value.field == "e"
    assert f"expected a string holding an integer (Java Integer), got {type(value).__name__} {value!r}" in info.value.reason


@pytest.mark.parametrize("decode", BOTH)
def test_a_str_subclass_value_is_read_as_its_text(decode: Any) -> None:
    class Text(str):
        pass

    ext = {**full_ext(SendMessageRequestHeaderV2), "e": Text("7"), "k": Text("TRUE")}
    header = decode(SendMessageRequestHeaderV2, ext)
    assert (header.e, header.k) == (7, True)
    with pytest.raises(CustomHeaderError) as info:
        decode(SendMessageRequestHeaderV2, {**ext, "e": Text("1.5")})
    assert info.value.reason == "cannot parse '1.5': expected an integer (Java Integer: optional sign, ASCII digits)"


# -- what real clients send ----------------------------------------------------------------


def test_cpp_send_message_with_batch_one() -> None:
    ext = {
        "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "HiDg=", "batch": "1", "bornTimestamp": "1700000000000",
        "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "flag": "0", "producerGroup": "P",
        "properties": "WAIT\x01true\x02", "queueId": "2", "reconsumeTimes": "0", "sysFlag": "0",
        "topic": "PeerTopic", "unitMode": "0",
    }
    for decode in (decode_header, generic_decode):
        h = decode(SendMessageRequestHeader, ext)
        assert (h.batch, h.unitMode, h.queueId, h.bornTimestamp) == (True, False, 2, 1700000000000)


def test_js_send_message_v2_without_l_m_n() -> None:
    ext = {"a": "P", "b": "PeerTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000001",
           "h": "0", "i": "TAGS\x01t\x02", "j": "0", "k": "false"}
    h = decode_header(SendMessageRequestHeaderV2, ext)
    assert (h.l, h.m, h.n, h.k) == (None, False, None, False)
    assert h == generic_decode(SendMessageRequestHeaderV2, ext)
    # Java always writes the primitive booleans back
    assert encode_header(h) == {**ext, "m": "false"}


def test_js_update_offset_minus_one() -> None:
    h = decode_header(H.UpdateConsumerOffsetRequestHeader,
                      {"topic": "T", "consumerGroup": "G", "queueId": "0", "commitOffset": "-1"})
    assert h.commitOffset == -1


def test_js_null_queue_offset_is_missing() -> None:
    ext = {**full_ext(H.PullMessageRequestHeader), "queueOffset": None}
    for decode in (decode_header, generic_decode):
        with pytest.raises(CustomHeaderError) as info:
            decode(H.PullMessageRequestHeader, ext)
        assert info.value.field == "queueOffset"


# -- V1 <-> V2 -----------------------------------------------------------------------------

V1_SAMPLE = SendMessageRequestHeader(
    producerGroup="pg", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=3, sysFlag=1,
    bornTimestamp=1700000000123, flag=9, properties="KEYS\x01k\x02", reconsumeTimes=2, unitMode=True,
    batch=True, maxReconsumeTimes=16, bname="broker-a",
)


def test_from_v1_maps_like_create_send_message_request_header_v2() -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(V1_SAMPLE)
    assert v2 == SendMessageRequestHeaderV2(
        a="pg", b="T", c="TBW102", d=4, e=3, f=1, g=1700000000123, h=9, i="KEYS\x01k\x02", j=2, k=True,
        l=16, m=True, n="broker-a", bname=None,
    )


def test_v1_v2_round_trips() -> None:
    assert SendMessageRequestHeaderV2.from_v1(V1_SAMPLE).to_v1() == V1_SAMPLE
    v2 = SendMessageRequestHeaderV2.from_v1(V1_SAMPLE)
    v2.bname = "proxy-side"  # the inherited field is not part of the conversion (as in Java)
    back = SendMessageRequestHeaderV2.from_v1(v2.to_v1())
    assert back.bname is None and attrs.evolve(back, bname="proxy-side") == v2


def test_v2_wire_to_v1() -> None:
    ext = encode_header(SendMessageRequestHeaderV2.from_v1(V1_SAMPLE))
    assert decode_header(SendMessageRequestHeaderV2, ext).to_v1() == V1_SAMPLE


# -- golden frames from RocketMQ 4.9.8 ------------------------------------------------------

_MANIFESTS = [
    Path(__file__).resolve().parents[2] / "conformance" / "golden" / "java-4.9.8" / "manifest.json",
    Path("/work/shared/golden-java/manifest.json"),
]


def _golden_frames() -> list[dict[str, Any]]:
    for path in _MANIFESTS:
        if path.is_file():
            return json.loads(path.read_text())["frames"]
    return []


def _golden_cases() -> list[Any]:
    cases = []
    for frame in _golden_frames():
        if frame["code"] == 310:
            cls: type = SendMessageRequestHeaderV2
        elif frame["code"] == 11:
            cls = H.PullMessageRequestHeader
        elif frame["file"].startswith("send_message_response"):
            cls = H.SendMessageResponseHeader
        else:
            continue
        cases.append(pytest.param(frame, cls, id=frame["file"]))
    return cases


GOLDEN = _golden_cases()


@pytest.mark.skipif(not GOLDEN, reason="no golden manifest")
@pytest.mark.parametrize("frame, cls", GOLDEN)
def test_golden_ext_fields(frame: dict[str, Any], cls: type) -> None:
    ext = frame["extFields"]
    obj = decode_header(cls, ext)
    assert obj == generic_decode(cls, ext)
    encoded = encode_header(obj)
    assert encoded == generic_encode(obj)
    names = {spec.name for spec in header_fields(cls)}
    assert encoded == {k: v for k, v in ext.items() if k in names}
    if frame["serializeType"] == "ROCKETMQ":
        # FastCodesHeader.encode writes the header's fields first, in declaration order
        assert list(encoded.items()) == list(ext.items())[: len(encoded)]


def test_golden_values() -> None:
    frames = {f["file"]: f for f in _golden_frames()}
    if not frames:
        pytest.skip("no golden manifest")
    v2 = decode_header(SendMessageRequestHeaderV2, frames["send_message_v2__ROCKETMQ.bin"]["extFields"])
    assert (v2.d, v2.e, v2.g, v2.k, v2.l, v2.m, v2.n, v2.bname) == (4, 3, 1700000000123, False, 16, False, "broker-a", None)
    pull = decode_header(H.PullMessageRequestHeader, frames["pull_message__ROCKETMQ.bin"]["extFields"])
    assert (pull.queueOffset, pull.commitOffset, pull.sysFlag, pull.bname) == (12345678901, 12345678000, 7, "broker-a")
    resp = decode_header(H.SendMessageResponseHeader, frames["send_message_response__ROCKETMQ.bin"]["extFields"])
    assert (resp.msgId, resp.queueId, resp.queueOffset, resp.transactionId) == (
        "7F00000100002A9F0000000000000003", 3, 42, None)


# -- fast path -----------------------------------------------------------------------------


def test_fast_codecs() -> None:
    assert set(FAST_HEADERS) == {
        SendMessageRequestHeader, SendMessageRequestHeaderV2, H.SendMessageResponseHeader,
        H.PullMessageRequestHeader, H.PullMessageResponseHeader,
    }
    assert not has_fast_codec(H.QueryConsumerOffsetRequestHeader)


TYPICAL = {
    SendMessageRequestHeaderV2: {"a": "P", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0",
                                 "g": "1700000000123", "h": "0", "i": "p", "j": "0", "k": "false",
                                 "m": "false", "n": "broker-a"},
    SendMessageRequestHeader: {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102",
                               "defaultTopicQueueNums": "4", "queueId": "2000", "sysFlag": "0",
                               "bornTimestamp": "1700000000000", "flag": "70000", "batch": "1"},
    H.SendMessageResponseHeader: {"msgId": "7F00000100002A9F0000000000000003", "queueId": "3",
                                  "queueOffset": "123456789"},
    H.PullMessageRequestHeader: {"consumerGroup": "G", "topic": "T", "queueId": "1", "queueOffset": "0",
                                 "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0",
                                 "suspendTimeoutMillis": "15000", "subscription": "*",
                                 "subVersion": "1700000000000"},
    H.PullMessageResponseHeader: {"suggestWhichBrokerId": "0", "nextBeginOffset": "33", "minOffset": "0",
                                  "maxOffset": "1234567"},
}


@pytest.mark.parametrize("cls", FAST_HEADERS, ids=lambda c: c.__name__)
def test_fast_path_handles_typical_traffic_itself(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """Typical values must not fall back to the generic path (that would be slow, not wrong)."""
    expected = generic_decode(cls, TYPICAL[cls])
    expected_ext = generic_encode(expected)

    def boom(*args: Any) -> Any:
        raise AssertionError("fast path fell back to the generic path")

    monkeypatch.setattr(fast, "generic_decode", boom)
    monkeypatch.setattr(fast, "generic_encode", boom)
    obj = decode_header(cls, TYPICAL[cls])
    assert obj == expected
    assert list(encode_header(obj).items()) == list(expected_ext.items())


@pytest.mark.parametrize("cls", FAST_HEADERS, ids=lambda c: c.__name__)
def test_fast_encode_of_required_none_matches_generic(cls: type) -> None:
    for spec in header_fields(cls):
        obj = full_obj(cls)
        setattr(obj, spec.name, None)
        assert list(encode_header(obj).items()) == list(generic_encode(obj).items())


# -- registry ------------------------------------------------------------------------------


def test_registry() -> None:
    assert REQUEST_HEADERS[10] is SendMessageRequestHeader
    assert REQUEST_HEADERS[310] is REQUEST_HEADERS[320] is SendMessageRequestHeaderV2
    assert REQUEST_HEADERS[11] is H.PullMessageRequestHeader
    assert REQUEST_HEADERS[105] is H.GetRouteInfoRequestHeader
    assert RESPONSE_HEADERS[310] is H.SendMessageResponseHeader
    assert RESPONSE_HEADERS[11] is H.PullMessageResponseHeader
    assert RESPONSE_HEADERS[14] is H.QueryConsumerOffsetResponseHeader
    assert H.request_header_class(31) is H.GetMinOffsetRequestHeader
    assert H.response_header_class(30) is H.GetMaxOffsetResponseHeader
    assert H.request_header_class(34) is None  # HEART_BEAT: body only
    registered = set(REQUEST_HEADERS.values()) | set(RESPONSE_HEADERS.values())
    assert registered == set(ALL_HEADERS)
    assert all(is_header_class(cls) for cls in registered)
