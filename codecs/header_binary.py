"""The ROCKETMQ binary header serializer (``RocketMQSerializable``).

Layout, big-endian::

    code i16 | language u8 | version i16 | opaque i32 | flag i32
    | remark: i32 length + UTF-8
    | ext fields: i32 total length, then per entry u16 key length + key,
                  i32 value length + value

``code`` and ``version`` are Java shorts: values outside -32768..32767 cannot be
written here (JSON keeps them). A zero-length remark or ext block decodes as absent
(``None``), as Java reads it. A zero-length ext value decodes as ``""`` (Java reads
null; keeping ``""`` makes re-encoding exact).

Decoding the ext block: a per-entry loop is the reference; a block laid out like the
last one of its length (same key bytes, same value lengths: what a producer sends
request after request) is read with one precompiled ``struct`` call instead, checked
against the recorded layout in C (see :func:`_decode_ext`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from .command import LanguageCode, RemotingCommand, SerializeType
from .errors import HeaderDecodeError, HeaderEncodeError

__all__ = ["encode_binary_header", "decode_binary_header"]

_FIXED = struct.Struct(">hBhiii")  # code, language, version, opaque, flag, remark length
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_LANGUAGES = {lang.value: lang for lang in LanguageCode}


#: Ext key -> its encoded length and bytes: the same few keys go out on every command.
_KEY_PREFIXES: dict[str, bytes] = {}
_MAX_KEY_PREFIXES = 1024


def _key_prefix(key: str) -> bytes:
    k = key.encode()
    if len(k) > 0xFFFF:
        raise HeaderEncodeError(f"ext field key longer than 65535 bytes: {key[:40]!r}...")
    if len(_KEY_PREFIXES) >= _MAX_KEY_PREFIXES:
        _KEY_PREFIXES.clear()
    prefix = _KEY_PREFIXES[key] = len(k).to_bytes(2, "big") + k
    return prefix


def _encode_ext(ext: dict[str, str]) -> bytes:
    out: list[bytes] = []
    known = _KEY_PREFIXES.get
    pack_len = _I32.pack
    for key, value in ext.items():
        if value is None:
            continue
        v = value.encode()
        out += (known(key) or _key_prefix(key), pack_len(len(v)), v)
    return b"".join(out)


def encode_binary_header(cmd: RemotingCommand, ext: dict[str, str] | None) -> bytes:
    """Header bytes for ``cmd`` with ``ext`` as its ext fields (already merged)."""
    if not -0x8000 <= cmd.code <= 0x7FFF:
        raise HeaderEncodeError(
            f"code {cmd.code} does not fit the ROCKETMQ header's signed short; use JSON"
        )
    if not -0x8000 <= cmd.version <= 0x7FFF:
        raise HeaderEncodeError(f"version {cmd.version} does not fit a signed short")
    try:
        remark = cmd.remark.encode("utf-8") if cmd.remark else b""
        ext_bytes = _encode_ext(ext) if ext else b""
        fixed = _FIXED.pack(
            cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag, len(remark)
        )
    except struct.error as exc:
        raise HeaderEncodeError(f"header field out of range: {exc}") from None
    except UnicodeEncodeError as exc:
        raise HeaderEncodeError(f"header text is not encodable as UTF-8: {exc}") from None
    return b"".join((fixed, remark, _I32.pack(len(ext_bytes)), ext_bytes))


class _Shape(NamedTuple):
    """The layout of one ext block: its key lengths, key bytes and value lengths.

    ``unpack`` reads the whole block in one call, keys and values as bytes and the
    length fields as ints; a block has this shape exactly when those ints and key bytes
    equal the recorded ones (same total length is the cache key).
    """

    unpack: Callable[[bytes, int], tuple[Any, ...]]
    klens: tuple[int, ...]
    kbytes: tuple[bytes, ...]
    vlens: tuple[int, ...]
    keys: tuple[str, ...]


#: Ext block length -> the last shape seen with that length. Producers send the same
#: keys with mostly the same value lengths request after request, so most blocks hit.
_SHAPES: dict[int, _Shape] = {}
_MAX_SHAPES = 256
_MAX_SHAPE_FIELDS = 64
#: Ext block length -> its misses since its shape was last learned (or ever).
_MISSES: dict[int, int] = {}
_MAX_MISSES = 4 * _MAX_SHAPES
_LEARN_AFTER = 2
_RELEARN_AFTER = 8
_utf8 = bytes.decode


def _decode_ext_loop(header: bytes, pos: int, end: int) -> dict[str, str]:
    """The reference reading, entry by entry. Lengths are checked once at the end (a
    short block makes ``unpack_from`` fail, an overrun leaves ``pos`` past ``end``);
    any fault is reported by :func:`_check_ext`, which finds the first bad entry."""
    ext: dict[str, str] = {}
    unpack_key = _U16.unpack_from
    unpack_val = _I32.unpack_from
    start = pos
    try:
        while pos < end:
            (klen,) = unpack_key(header, pos)
            kstart = pos + 2
            kend = kstart + klen
            (vlen,) = unpack_val(header, kend)
            if vlen < 0:
                break
            pos = kend + 4 + vlen
            ext[header[kstart:kend].decode()] = header[kend + 4 : pos].decode()
    except struct.error:
        pass
    except UnicodeDecodeError:
        _check_ext(header, start, end)  # a cut-short block is the first fault
        raise
    if pos != end:
        _check_ext(header, start, end)
        raise AssertionError("_check_ext passed a block the loop could not read")
    return ext


def _check_ext(header: bytes, pos: int, end: int) -> None:
    """Raise the error for the first bad entry of an ext block, if it has one."""
    while pos < end:
        if pos + 2 > end:
            raise HeaderDecodeError("ROCKETMQ header ext field cut short in a key length")
        klen = _U16.unpack_from(header, pos)[0]
        kend = pos + 2 + klen
        if kend + 4 > end:
            raise HeaderDecodeError("ROCKETMQ header ext field key overruns the header")
        vlen = _I32.unpack_from(header, kend)[0]
        vend = kend + 4 + vlen
        if vlen < 0 or vend > end:
            key = header[pos + 2 : kend].decode("utf-8", "replace")
            raise HeaderDecodeError(
                f"ROCKETMQ header ext field {key!r} value length {vlen} overruns the header"
            )
        pos = vend


def _decode_ext(header: bytes, pos: int, end: int) -> dict[str, str]:
    """The ext block ``header[pos:end]`` as a dict in wire order.

    A block shaped like the cached one of its length is read with one precompiled
    ``struct`` call, a C-level compare of its lengths and key bytes, and its values
    decoded by ``map``: about half the cost of the per-entry loop. Every other block
    goes through the loop, the reference and the only source of errors. A length's
    shape is learned at its :data:`_LEARN_AFTER`-th miss (a length seen once costs no
    learning) and replaced after :data:`_RELEARN_AFTER` misses against it (two layouts
    alternating under one length cost a re-learn only now and then).
    """
    size = end - pos
    shape = _SHAPES.get(size)
    if shape is not None:
        unpack, klens, kbytes, vlens, keys = shape
        vals = unpack(header, pos)
        if vals[2::4] == vlens and vals[1::4] == kbytes and vals[0::4] == klens:
            return dict(zip(keys, map(_utf8, vals[3::4])))
    ext = _decode_ext_loop(header, pos, end)
    misses = _MISSES.get(size, 0) + 1
    if misses < (_LEARN_AFTER if shape is None else _RELEARN_AFTER):
        if len(_MISSES) >= _MAX_MISSES:
            _MISSES.clear()
        _MISSES[size] = misses
    else:
        _MISSES.pop(size, None)
        _learn(header, pos, end)
    return ext


def _learn(header: bytes, pos: int, end: int) -> None:
    """Cache the shape of a block the loop has just read without error."""
    klens, kbytes, vlens = [], [], []
    size = end - pos
    while pos < end:
        klen = _U16.unpack_from(header, pos)[0]
        kend = pos + 2 + klen
        vlen = _I32.unpack_from(header, kend)[0]
        klens.append(klen)
        kbytes.append(header[pos + 2 : kend])
        vlens.append(vlen)
        pos = kend + 4 + vlen
        if len(klens) > _MAX_SHAPE_FIELDS:
            return
    if len(_SHAPES) >= _MAX_SHAPES:
        _SHAPES.clear()
    fmt = ">" + "".join([f"H{k}si{v}s" for k, v in zip(klens, vlens)])
    _SHAPES[size] = _Shape(
        struct.Struct(fmt).unpack_from,
        tuple(klens),
        tuple(kbytes),
        tuple(vlens),
        tuple(map(_utf8, kbytes)),
    )


def decode_binary_header(header: bytes | memoryview) -> RemotingCommand:
    """Decode a ROCKETMQ binary header into a command without a body."""
    if type(header) is not bytes:
        header = bytes(header)
    end = len(header)
    if end < _FIXED.size + 4:
        raise HeaderDecodeError(
            f"ROCKETMQ header too short: {end} bytes, at least {_FIXED.size + 4} needed"
        )
    code, language, version, opaque, flag, remark_len = _FIXED.unpack_from(header, 0)
    lang = _LANGUAGES.get(language)
    if lang is None:
        raise HeaderDecodeError(f"unknown language code {language} in ROCKETMQ header")
    pos = _FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > end:
        raise HeaderDecodeError(f"ROCKETMQ header remark length {remark_len} overruns the header")
    try:
        remark = header[pos : pos + remark_len].decode() if remark_len else None
        pos += remark_len
        ext_len = _I32.unpack_from(header, pos)[0]
        pos += 4
        if ext_len < 0 or pos + ext_len != end:
            raise HeaderDecodeError(
                f"ROCKETMQ header ext-fields length {ext_len} does not match the "
                f"{end - pos} bytes left in the header"
            )
        ext = _decode_ext(header, pos, end) if ext_len else None
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"ROCKETMQ header text is not valid UTF-8: {exc}") from None
    return RemotingCommand(
        code, lang, version, opaque, flag, remark, ext, b"", None, SerializeType.ROCKETMQ
    )


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
from .accel import accelerated  # noqa: E402

decode_binary_header = accelerated(decode_binary_header)
encode_binary_header = accelerated(encode_binary_header)
