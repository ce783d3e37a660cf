"""The codec generated from a header's declaration (custom_header.compiled) against the
generic cattrs path: same objects, same dicts in the same order, same errors."""

from __future__ import annotations

import enum
import functools
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trocket.codecs import headers as H
from trocket.codecs.custom_header import (
    JAVA_FAST_CODES_HEADERS,
    codec_of,
    compile_codec,
    decode_header,
    encode_header,
    field,
    generic_decode,
    generic_encode,
    has_fast_codec,
    header,
    header_fields,
    is_header_class,
    register_codec,
)
from trocket.codecs.java_ints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from trocket.codecs.java_hashmap import hashmap_reordered
from trocket.codecs import accel
from trocket.codecs.custom_header import compiled
from trocket.codecs.custom_header.compiled import HeaderCodec, _stores_directly, codec_source
from trocket.codecs.errors import CustomHeaderError

# -- headers a user could declare, beside trocket's own --------------------------------------


@header
class Every:
    """Every kind, required and optional, with and without defaults."""

    s: str = field("str", required=True)
    i: int = field("int", required=True)
    lg: int = field("long", required=True)
    b: bool = field("bool", required=True)
    d: float = field("double", required=True)
    os: str | None = field("str")
    oi: int | None = field("int", default=7)
    olg: int | None = field("long")
    ob: bool = field("bool", default=False)
    od: float | None = field("double", default=0.5)


@header
class Empty:
    pass


@header
class PostInit:
    """__attrs_post_init__ runs: the generated decoder must call the class."""

    key: str = field("str", required=True)
    n: int | None = field("int")

    def __attrs_post_init__(self) -> None:
        if self.key == "reject":
            raise ValueError("post-init says no")


@header
class Child(Every):
    """Inherited fields first, then its own."""

    extra: int | None = field("long")


@header
class Plain:
    """What a typed service declares: the kinds the compiled twin fills slot by slot."""

    key: str = field("str", required=True)
    n: int = field("int", required=True)
    offset: int | None = field("long")
    flag: bool = field("bool", default=False)
    note: str | None = field("str", default="none")
    count: int | None = field("int", default=3)


class PlainChild(Plain):
    """A subclass handed to its parent's codec: the twin leaves it to the generated one."""


OURS = sorted({getattr(H, n) for n in H.__all__ if is_header_class(getattr(H, n))}, key=lambda c: c.__name__)
USERS = [Every, Empty, PostInit, Child, Plain]
ALL = OURS + USERS
ids = lambda c: c.__name__  # noqa: E731

INT32 = st.one_of(st.integers(-1, 1100), st.integers(INT32_MIN, INT32_MAX))
INT64 = st.one_of(st.integers(-1, 1100), st.integers(0, 10**13), st.integers(INT64_MIN, INT64_MAX))
VALUES = {"str": st.text(), "int": INT32, "long": INT64, "bool": st.booleans(), "double": st.floats(allow_nan=False)}
TRICKY = [
    "", " ", "0", "-0", "+1", "-1", "007", "1023", "1024", "-2", "999999999", "1000000000", "2147483647",
    "2147483648", "-2147483648", "-2147483649", "999999999999999999", "1000000000000000000",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "0" * 30 + "5", "1_0", " 1", "1\n",
    "٣", "²", "１", "0x10", "1.5", "1e3", "NaN", "-Infinity", "1f", ".5", "true", "FALSE", "tRuE", "yes", "falſe",
]
BOUNDS = [str(b + d) for b in (INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 10**9, 10**18) for d in (-1, 0, 1)]
WIRE = st.one_of(
    st.sampled_from(TRICKY + BOUNDS),
    st.text(max_size=8),
    st.from_regex(r"[+-]?[0-9]{1,21}", fullmatch=True),
    st.integers(INT64_MIN - 10, INT64_MAX + 10).map(str),
    st.floats().map(repr),
)
NON_STRINGS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5000), st.floats(allow_nan=False))


#: compile_codec's result per class, made once for the hypothesis tests' examples
compiled_codec = functools.cache(compile_codec)


def objects(cls: type) -> st.SearchStrategy[Any]:
    kwargs = {}
    for spec in header_fields(cls):
        nullable = not spec.required and spec.default is None
        kwargs[spec.name] = st.one_of(st.none(), VALUES[spec.kind]) if nullable else VALUES[spec.kind]
    return st.builds(cls, **kwargs)


def ext_maps(cls: type, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    specs = header_fields(cls)
    valid = {s.name: st.one_of(objects_wire(s.kind), values) for s in specs}
    return st.one_of(
        st.fixed_dictionaries(
            {s.name: valid[s.name] for s in specs if s.required},
            optional={s.name: valid[s.name] for s in specs if not s.required},
        ),
        st.dictionaries(st.sampled_from([*(s.name for s in specs), "AccessKey", "x"]), values, max_size=12),
    )


def objects_wire(kind: str) -> st.SearchStrategy[str]:
    return {"str": st.text(max_size=8), "int": INT32.map(str), "long": INT64.map(str),
            "bool": st.sampled_from(["true", "false", "1", "0"]), "double": st.floats().map(repr)}[kind]


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What a call gives: its result, or its error's type and text (and fields)."""
    try:
        result = fn(*args)
    except CustomHeaderError as err:
        return "header error", (err.header, err.field, err.reason, err.__cause__, err.__suppress_context__)
    except Exception as err:  # noqa: BLE001 - the same exception is the point
        return "error", (type(err), str(err))
    # repr: the type and every field, and NaN equal to NaN
    return "ok", list(result.items()) if isinstance(result, dict) else (type(result), repr(result))


@pytest.mark.parametrize("cls", ALL, ids=ids)
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_valid_objects_encode_and_decode_as_generic(cls: type, data: st.DataObject) -> None:
    codec = compiled_codec(cls)
    obj = data.draw(objects(cls))
    ext = codec.encode(obj)
    assert list(ext.items()) == list(generic_encode(obj).items())
    assert codec.decode(ext) == generic_decode(cls, ext) == obj


@pytest.mark.parametrize("cls", ALL, ids=ids)
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wire_order_is_the_hashmap_order_of_what_encode_writes(cls: type, data: st.DataObject) -> None:
    """``encode_wire`` (one dict display in a precomputed order when every field is set)
    writes exactly ``encode``'s fields in Java's HashMap order, whichever are None, and
    values of the wrong type encode or fail as ``encode`` does."""
    codec = compiled_codec(cls)
    obj = data.draw(objects(cls))
    for spec in header_fields(cls):
        if data.draw(st.booleans()):
            setattr(obj, spec.name, data.draw(st.one_of(st.none(), ODD)))
    expected = outcome(lambda o: hashmap_reordered(codec.encode(o)), obj)
    assert outcome(codec.encode_wire, obj) == expected


@pytest.mark.parametrize("cls", ALL, ids=ids)
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_arbitrary_ext_maps_decode_as_generic(cls: type, data: st.DataObject) -> None:
    codec = compiled_codec(cls)
    ext = data.draw(ext_maps(cls, st.one_of(WIRE, NON_STRINGS)))
    assert outcome(codec.decode, ext) == outcome(generic_decode, cls, ext)


class Color(enum.IntEnum):
    RED = 3


ODD = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.sampled_from(list(Color)),
                st.text(max_size=4), st.just(b"x"))


@pytest.mark.parametrize("cls", [Every, Child, *OURS[:6]], ids=ids)
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_odd_values_encode_as_generic(cls: type, data: st.DataObject) -> None:
    """Values of the wrong type (a bool or an enum where an int belongs, floats, None in a
    required field) encode the same, or fail the same, on both paths."""
    codec = compiled_codec(cls)
    obj = data.draw(objects(cls))
    for spec in header_fields(cls):
        if data.draw(st.booleans()):
            setattr(obj, spec.name, data.draw(ODD))
    assert outcome(codec.encode, obj) == outcome(generic_encode, obj)


def valid_ext(cls: type) -> dict[str, str]:
    return {s.name: {"str": "v", "int": "1", "long": "2", "bool": "true", "double": "1.5"}[s.kind]
            for s in header_fields(cls)}


@pytest.mark.parametrize("cls", ALL, ids=ids)
def test_every_field_with_every_tricky_value_as_generic(cls: type) -> None:
    """Each field of a valid map in turn set to each hard value (or removed): the same
    result or error. Exhaustive where sampling could miss a boundary."""
    codec = compile_codec(cls)
    base = valid_ext(cls)
    odd: list[Any] = [*TRICKY, *BOUNDS, None, True, False, 0, 5, 3000, -1, 1.0, 2.5, b"1", ["1"], {"1": 1}]
    for spec in header_fields(cls):
        for value in odd:
            ext = {**base, spec.name: value}
            assert outcome(codec.decode, ext) == outcome(generic_decode, cls, ext), (spec.name, value)
        ext = {k: v for k, v in base.items() if k != spec.name}
        assert outcome(codec.decode, ext) == outcome(generic_decode, cls, ext), (spec.name, "absent")


@pytest.mark.parametrize("cls", ALL, ids=ids)
def test_none_and_empty_ext_as_generic(cls: type) -> None:
    codec = compile_codec(cls)
    for ext in (None, {}):
        assert outcome(codec.decode, ext) == outcome(generic_decode, cls, ext)


def test_every_kind_by_example() -> None:
    codec = compile_codec(Every)
    ext = {"s": "x", "i": "-5", "lg": str(2**62), "b": "TRUE", "d": "2.5E3", "oi": "1024", "ob": "1"}
    obj = codec.decode(ext)
    assert obj == Every(s="x", i=-5, lg=2**62, b=True, d=2500.0, oi=1024, ob=True)
    assert list(codec.encode(obj).items()) == [
        ("s", "x"), ("i", "-5"), ("lg", str(2**62)), ("b", "true"), ("d", "2500.0"), ("oi", "1024"),
        ("ob", "true"), ("od", "0.5"),
    ]
    with pytest.raises(CustomHeaderError, match=r"Every\.i: cannot parse '2147483648'"):
        codec.decode({**ext, "i": "2147483648"})
    with pytest.raises(CustomHeaderError, match=r"the custom field <lg> is null"):
        codec.decode({"s": "x", "i": "1"})


def test_objects_are_made_as_init_makes_them() -> None:
    assert _stores_directly(Every) and _stores_directly(Child) and _stores_directly(H.GetRouteInfoRequestHeader)
    assert not _stores_directly(PostInit)
    assert "_new(_cls)" in codec_source(Every)[0] and "_cls(**kw)" in codec_source(PostInit)[0]
    codec = compile_codec(PostInit)
    assert codec.decode({"key": "k", "n": "3"}) == PostInit(key="k", n=3)
    assert outcome(codec.decode, {"key": "reject"}) == outcome(generic_decode, PostInit, {"key": "reject"})
    child = compile_codec(Child).decode({"s": "", "i": "0", "lg": "0", "b": "0", "d": "0", "extra": "9"})
    assert type(child) is Child and child.extra == 9 and child.oi == 7


def test_registry_picks_hand_written_else_generated() -> None:
    assert {cls for cls in OURS if has_fast_codec(cls)} == {
        H.SendMessageRequestHeader, H.SendMessageRequestHeaderV2, H.SendMessageResponseHeader,
        H.PullMessageRequestHeader, H.PullMessageResponseHeader,
    }
    assert codec_of(H.PullMessageRequestHeader).decode is H.fast.FAST_CODECS[H.PullMessageRequestHeader].decode
    generated = codec_of(H.GetRouteInfoRequestHeader)
    # the generated decode, or with the accelerator on its compiled twin (built from it)
    expected = "_TypedHeaderCodec.decode" if accel.ACTIVE else "GetRouteInfoRequestHeader.<generated decode>"
    assert generated.decode.__qualname__ == expected
    assert codec_of(H.GetRouteInfoRequestHeader) == generated  # made once
    assert decode_header(H.GetRouteInfoRequestHeader, {"topic": "T"}) == H.GetRouteInfoRequestHeader(topic="T")
    assert encode_header(H.GetRouteInfoRequestHeader(topic="T")) == {"topic": "T"}
    with pytest.raises(TypeError, match="not a custom header class"):
        decode_header(int, {})
    with pytest.raises(TypeError, match="not a custom header class"):
        encode_header(object())


def test_register_codec_replaces_the_generated_one() -> None:
    @header
    class Mine:
        n: int = field("int", required=True)

    assert encode_header(Mine(n=1)) == {"n": "1"}  # generated on first use
    register_codec(Mine, lambda ext: Mine(n=int(ext["n"])), lambda o: {"n": str(o.n)})
    assert has_fast_codec(Mine) and not has_fast_codec(Every)
    assert decode_header(Mine, {"n": "5"}) == Mine(n=5)
    with pytest.raises(TypeError):
        register_codec(int, lambda ext: 0, lambda o: {})


def test_java_fast_codes_is_declared() -> None:
    assert {H.SendMessageRequestHeaderV2, H.SendMessageResponseHeader, H.PullMessageRequestHeader,
            H.PullMessageResponseHeader} <= JAVA_FAST_CODES_HEADERS
    assert H.SendMessageRequestHeader not in JAVA_FAST_CODES_HEADERS and Every not in JAVA_FAST_CODES_HEADERS

    @header(java_fast_codes=True)
    class Fast:
        a: str = field("str", required=True)

    assert Fast in JAVA_FAST_CODES_HEADERS and attrs.has(Fast)


def test_field_names_are_wire_names() -> None:
    with pytest.raises(TypeError, match="leading '_'"):

        @header
        class Bad:
            _x: int = field("int")


# -- the compiled twin of a generated codec (codecs/_accel.pyx, _TypedHeaderCodec) ----------

_PURE_CODECS: dict[type, HeaderCodec] = {}


def pure_codec(cls: type) -> HeaderCodec:
    """``cls``'s generated codec as the pure path makes it (no compiled twin)."""
    codec = _PURE_CODECS.get(cls)
    if codec is None:
        saved = compiled.specialize_codec
        compiled.specialize_codec = accel.pure("specialize_codec")
        try:
            codec = _PURE_CODECS[cls] = compile_codec(cls)
        finally:
            compiled.specialize_codec = saved
    return codec


_UNSET = object()


@pytest.mark.parametrize("cls", ALL, ids=ids)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_specialized_codec_differential(cls: type, data: st.DataObject) -> None:
    """What compile_codec returns (with the accelerator on, ``specialize_codec``'s twin: its
    decode and encode_wire) against the generated functions: the same objects, the same
    dicts in the same order, the same errors, for arbitrary ext maps and objects with odd,
    None or unset fields."""
    fast, pure = compiled_codec(cls), pure_codec(cls)
    ext = data.draw(st.one_of(ext_maps(cls, st.one_of(WIRE, NON_STRINGS)), st.none()))
    assert outcome(fast.decode, ext) == outcome(pure.decode, ext)
    obj = data.draw(objects(cls))
    if cls is Plain and data.draw(st.booleans()):
        obj = PlainChild(**attrs.asdict(obj))
    for spec in header_fields(cls):
        value = data.draw(st.one_of(st.just(_UNSET), ODD)) if data.draw(st.booleans()) else None
        if value is _UNSET:
            object.__delattr__(obj, spec.name)
        elif value is not None or data.draw(st.booleans()):
            object.__setattr__(obj, spec.name, value)
    assert outcome(fast.encode_wire, obj) == outcome(pure.encode_wire, obj)


def test_the_twin_serves_plain_classes_only() -> None:
    """The twin takes the classes whose objects it can fill slot by slot; a class with a
    double field, or whose __init__ runs code, keeps its generated functions."""
    assert pure_codec(Every).decode.__qualname__ == "Every.<generated decode>"
    assert compile_codec(PostInit).decode.__qualname__ == "PostInit.<generated decode>"
    assert compile_codec(Every).decode.__qualname__ == "Every.<generated decode>"  # its doubles
    plain = compile_codec(H.GetRouteInfoRequestHeader)
    assert plain.decode.__qualname__ == ("_TypedHeaderCodec.decode" if accel.ACTIVE else "GetRouteInfoRequestHeader.<generated decode>")
    assert plain.decode({"topic": "T"}) == H.GetRouteInfoRequestHeader(topic="T")
    assert plain.encode_wire(H.GetRouteInfoRequestHeader(topic="T")) == {"topic": "T"}
