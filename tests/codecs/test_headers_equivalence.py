"""The fast and generic custom-header paths agree: same objects, same dicts, same errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trocket.codecs import headers as H
from trocket.codecs.custom_header import (
    decode_header,
    encode_header,
    generic_decode,
    generic_encode,
    has_fast_codec,
    header_fields,
    is_header_class,
)
from trocket.codecs.java_ints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from trocket.codecs.errors import CustomHeaderError
from trocket.codecs.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2

ALL_HEADERS = sorted(
    {getattr(H, name) for name in H.__all__ if is_header_class(getattr(H, name))}, key=lambda c: c.__name__
)
FAST_HEADERS = [cls for cls in ALL_HEADERS if has_fast_codec(cls)]

# -- valid objects -------------------------------------------------------------------------

_int32 = st.one_of(st.integers(-1, 1100), st.integers(INT32_MIN, INT32_MAX))
_int64 = st.one_of(st.integers(-1, 1100), st.integers(0, 10**13), st.integers(INT64_MIN, INT64_MAX))
VALUES = {
    "str": st.text(),
    "int": _int32,
    "long": _int64,
    "bool": st.booleans(),
    "double": st.floats(allow_nan=False),
}


def objects(cls: type) -> st.SearchStrategy[Any]:
    """Objects Java could hold: required fields set, primitives (default not None) set."""
    kwargs = {}
    for spec in header_fields(cls):
        value = VALUES[spec.kind]
        nullable = not spec.required and spec.default is None
        kwargs[spec.name] = st.one_of(st.none(), value) if nullable else value
    return st.builds(cls, **kwargs)


@pytest.mark.parametrize("cls", FAST_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_objects_same_on_both_paths(cls: type, data: st.DataObject) -> None:
    obj = data.draw(objects(cls))
    fast_ext = encode_header(obj)
    generic_ext = generic_encode(obj)
    assert list(fast_ext.items()) == list(generic_ext.items())  # equal, in the same order
    assert list(fast_ext) == [s.name for s in header_fields(cls) if getattr(obj, s.name) is not None]
    assert all(type(v) is str for v in fast_ext.values())
    assert decode_header(cls, fast_ext) == obj
    assert generic_decode(cls, fast_ext) == obj


@pytest.mark.parametrize("cls", ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=50)
@given(data=st.data())
def test_generic_round_trip(cls: type, data: st.DataObject) -> None:
    obj = data.draw(objects(cls))
    assert generic_decode(cls, generic_encode(obj)) == obj


# -- arbitrary string maps -----------------------------------------------------------------

TRICKY = [
    "", " ", "0", "1", "-1", "+1", "-0", "+0", "007", "1023", "1024", "-2", "15000", "999999999", "1000000000",
    "2147483647", "2147483648", "-2147483648", "-2147483649", "999999999999999999", "1000000000000000000",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "0" * 30 + "5", "1_0", " 1", "1 ", "1\n", "٣", "²", "１", "0x10", "1.5", "1e3",
    "true", "false", "TRUE", "False", "tRuE", "yes", "no", "t", "falſe", "\x00", "null",
]


def wire_values(cls: type) -> st.SearchStrategy[Any]:
    kinds = {spec.kind for spec in header_fields(cls)}
    return st.one_of(
        st.sampled_from(TRICKY),
        st.text(max_size=8),
        st.from_regex(r"[+-]?[0-9]{1,20}", fullmatch=True),
        st.integers(-3, 2000).map(str),
        st.integers(INT64_MIN - 10, INT64_MAX + 10).map(str),
        *([st.floats().map(repr)] if "double" in kinds else []),
    )


VALID_WIRE = {
    "str": st.text(max_size=8),
    "int": st.one_of(st.integers(-1, 1100), st.integers(INT32_MIN, INT32_MAX)).map(str),
    "long": st.one_of(st.integers(-1, 1100), st.integers(0, 10**13), st.integers(INT64_MIN, INT64_MAX)).map(str),
    "bool": st.sampled_from(["true", "false", "1", "0", "TRUE", "False"]),
    "double": st.floats().map(repr),
}


def ext_maps(cls: type, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    specs = header_fields(cls)
    names = [s.name for s in specs]
    field_value = {s.name: st.one_of(VALID_WIRE[s.kind], VALID_WIRE[s.kind], values) for s in specs}
    return st.one_of(
        # required fields present, every value usually valid: reaches deep into the decoders
        st.fixed_dictionaries(
            {s.name: field_value[s.name] for s in specs if s.required},
            optional={s.name: field_value[s.name] for s in specs if not s.required},
        ),
        # anything goes, including missing required fields and unknown keys
        st.dictionaries(st.sampled_from([*names, "AccessKey", "x", "TRACE_ON"]), values, max_size=20),
    )


def outcome(decode: Any, cls: type, ext: Any) -> tuple[str, Any]:
    try:
        obj = decode(cls, ext)
    except CustomHeaderError as err:
        return "error", (err.header, err.field, err.reason)
    return "ok", (obj, list(generic_encode(obj).items()), list(encode_header(obj).items()))


@pytest.mark.parametrize("cls", FAST_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_arbitrary_string_maps_same_on_both_paths(cls: type, data: st.DataObject) -> None:
    ext = data.draw(ext_maps(cls, wire_values(cls)))
    fast = outcome(decode_header, cls, ext)
    generic = outcome(generic_decode, cls, ext)
    assert fast == generic
    if fast[0] == "ok":
        _, (obj, generic_items, fast_items) = fast
        assert fast_items == generic_items


@pytest.mark.parametrize("cls", FAST_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_non_string_values_same_on_both_paths(cls: type, data: st.DataObject) -> None:
    """JSON-typed values (ints, bools, null) that reach the codecs: both paths agree."""
    values = st.one_of(wire_values(cls), st.none(), st.booleans(), st.integers(-5, 5000), st.floats(allow_nan=False))
    ext = data.draw(ext_maps(cls, values))
    assert outcome(decode_header, cls, ext) == outcome(generic_decode, cls, ext)


def test_none_ext_same_on_both_paths() -> None:
    for cls in FAST_HEADERS:
        assert outcome(decode_header, cls, None) == outcome(generic_decode, cls, None)


@pytest.mark.parametrize(
    "spelling", ["15000", "0", "9223372036854775807", "+15000", "015000", "-1", "1_000", "\u0661\u0662", " 5", "", "x"]
)
def test_pull_constants_cache_agrees_with_generic_every_time(spelling: str) -> None:
    """The remembered int64 spellings (poll timeout, subscription version) change nothing:
    the first decode (learning) and later ones (known) match the generic path."""
    from trocket.codecs.headers import PullMessageRequestHeader
    from trocket.codecs.headers import fast

    ext = {"consumerGroup": "g", "topic": "t", "queueId": "1", "queueOffset": "5", "maxMsgNums": "32",
           "sysFlag": "0", "commitOffset": "4", "suspendTimeoutMillis": spelling, "subVersion": spelling}
    for _ in range(3):
        assert outcome(decode_header, PullMessageRequestHeader, ext) == outcome(generic_decode, PullMessageRequestHeader, ext)
    from trocket.codecs.custom_header._java import parse_int64

    assert all(parse_int64(k) == x for k, x in fast._KNOWN_I64.items())  # only what Java reads alike


def test_pull_constants_cache_is_bounded() -> None:
    from trocket.codecs.headers import PullMessageRequestHeader
    from trocket.codecs.headers import fast

    ext = {"consumerGroup": "g", "topic": "t", "queueId": "1", "queueOffset": "5", "maxMsgNums": "32",
           "sysFlag": "0", "commitOffset": "4", "suspendTimeoutMillis": "1"}
    for n in range(fast._MAX_KNOWN_I64 + 10):
        ext["subVersion"] = str(10**12 + n)
        assert decode_header(PullMessageRequestHeader, ext).subVersion == 10**12 + n
    assert len(fast._KNOWN_I64) <= fast._MAX_KNOWN_I64


# -- V1 <-> V2 -----------------------------------------------------------------------------


@settings(max_examples=200)
@given(v1=objects(SendMessageRequestHeader))
def test_v1_to_v2_to_v1(v1: SendMessageRequestHeader) -> None:
    v2 = SendMessageRequestHeaderV2.from_v1(v1)
    assert v2.to_v1() == v1
    assert v2.bname is None
    # and across the wire
    assert decode_header(SendMessageRequestHeaderV2, encode_header(v2)).to_v1() == v1


@settings(max_examples=200)
@given(v2=objects(SendMessageRequestHeaderV2))
def test_v2_to_v1_to_v2(v2: SendMessageRequestHeaderV2) -> None:
    back = SendMessageRequestHeaderV2.from_v1(v2.to_v1())
    assert back.bname is None
    v2.bname = None  # not carried by the Java conversions
    assert back == v2
