"""Custom command headers: how one is declared, and the codec each class carries.

A custom header is a typed view of a command's ext fields (Java's
``CommandCustomHeader``): an attrs class declared with :func:`header` and
:func:`field`, its attribute names the wire names, in wire order (:mod:`._spec`).
This package is the wire-level machinery only; it knows no RocketMQ header
(those are in :mod:`trocket.codecs.headers`, built on it), so anyone can declare
headers for a service of their own on :mod:`trocket.remoting`::

    @header
    class PutRequestHeader:
        key: str = field("str", required=True)
        ttl: int | None = field("long")

Every class has one codec, found by :func:`decode_header` / :func:`encode_header`:

* a hand-written one, when one is registered with :func:`register_codec`
  (trocket's hottest headers, :mod:`trocket.codecs.headers.fast`);
* else the one generated from its declaration (:mod:`.compiled`), made the first
  time the class is used.

The generic path (:mod:`.generic`, cattrs: a loop over the field specs) is the
reference both follow: the same objects, dicts and errors
(``CustomHeaderError(header, field, reason)``), as the tests check by hypothesis.

Measured (``benchmarks/codecs.py``, the headers without a hand-written codec): the
generated codec decodes 1.8-4x and encodes 2.4-3.6x faster than the generic path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._spec import JAVA_FAST_CODES_HEADERS, FieldSpec, field, header, header_fields, is_header_class
from ..java_hashmap import hashmap_reordered
from .compiled import HeaderCodec, compile_codec
from .generic import generic_decode, generic_encode
from ..accel import provide

__all__ = [
    "header",
    "field",
    "FieldSpec",
    "header_fields",
    "is_header_class",
    "JAVA_FAST_CODES_HEADERS",
    "HeaderCodec",
    "decode_header",
    "encode_header",
    "encode_header_wire",
    "register_codec",
    "codec_of",
    "has_fast_codec",
    "compile_codec",
    "generic_decode",
    "generic_encode",
]

T = TypeVar("T")

#: Header class -> its codec's functions (filled by register_codec, or on first use).
_DECODE: dict[type, Callable[[Mapping[str, str] | None], Any]] = {}
_ENCODE: dict[type, Callable[[Any], dict[str, str]]] = {}
_ENCODE_WIRE: dict[type, Callable[[Any], dict[str, str]]] = {}
#: The classes with a hand-written codec.
_HAND_WRITTEN: set[type] = set()

# the compiled encode_command encodes a lone custom header by its class's encode_wire,
# as wire_ext_fields would (the tables are shared: classes added later count)
provide("header_wire", (_ENCODE_WIRE, JAVA_FAST_CODES_HEADERS))


def register_codec(
    cls: type, decode: Callable[[Mapping[str, str] | None], Any], encode: Callable[[Any], dict[str, str]]
) -> None:
    """Make ``decode``/``encode`` the codec of header class ``cls`` (a hand-written
    one, which must give what the generic path gives)."""
    header_fields(cls)  # TypeError for a class that is not a header
    _DECODE[cls] = decode
    _ENCODE[cls] = encode
    _ENCODE_WIRE[cls] = lambda obj: hashmap_reordered(encode(obj))
    _HAND_WRITTEN.add(cls)


def codec_of(cls: type) -> HeaderCodec:
    """The codec of header class ``cls``: the registered one, else generated now
    (once). ``TypeError`` if ``cls`` is not a header class."""
    decode = _DECODE.get(cls)
    if decode is None:
        codec = compile_codec(cls)
        _DECODE[cls] = codec.decode
        _ENCODE[cls] = codec.encode
        _ENCODE_WIRE[cls] = codec.encode_wire
        return codec
    return HeaderCodec(decode, _ENCODE[cls], _ENCODE_WIRE[cls])


def has_fast_codec(cls: type) -> bool:
    """Whether ``cls`` has a hand-written codec (else a generated one serves it)."""
    return cls in _HAND_WRITTEN


def decode_header(cls: type[T], ext: Mapping[str, str] | None) -> T:
    """Decode ext fields into header ``cls`` with its codec.

    Raises :class:`~trocket.codecs.errors.CustomHeaderError` for a missing required field
    or a value that does not parse.
    """
    try:
        decode = _DECODE[cls]
    except KeyError:
        decode = codec_of(cls).decode
    return decode(ext)


def encode_header(obj: Any) -> dict[str, str]:
    """Encode header ``obj`` into ext fields (declaration order, ``None`` omitted)."""
    try:
        encode = _ENCODE[obj.__class__]
    except KeyError:
        encode = codec_of(obj.__class__).encode
    return encode(obj)


def encode_header_wire(obj: Any) -> dict[str, str]:
    """:func:`encode_header` in the order Java writes a non-FastCodes header's fields on
    the wire (its extFields ``HashMap``'s)."""
    try:
        encode = _ENCODE_WIRE[obj.__class__]
    except KeyError:
        encode = codec_of(obj.__class__).encode_wire
    return encode(obj)
