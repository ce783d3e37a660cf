"""JSON as RocketMQ's fastjson writes bodies, and a reader for what it writes.

RocketMQ serializes bodies with ``JSON.toJSONString(obj)``:

- a Java bean's properties in alphabetical order, null ones left out
  (use :class:`Bean`);
- a ``Map`` in its ``HashMap`` iteration order, null values left out, and
  **numeric keys unquoted**: ``{"brokerAddrs":{0:"127.0.0.1:10911"}}``
  (use a plain ``dict``; ``int`` keys are Java ``Long``/``Integer`` keys);
- strings escaped as in the command header (see :mod:`..header_json`).

That output is not valid JSON, so :func:`loads` accepts unquoted numeric keys (they
come back as ``int`` keys), as the C++ client's reader (``allowNumericKeys``) and the
JS client's ``JSON2`` do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import CodecError
from ..header_json import fastjson_quote
from ..java_hashmap import hashmap_capacity, java_string_hash

__all__ = ["Bean", "dumps", "dumps_bytes", "loads", "BodyDecodeError"]


class BodyDecodeError(CodecError):
    """A JSON body does not parse or does not have the expected shape."""


class Bean(dict):
    """A Java bean: written with its properties sorted by name, nulls left out."""


def _java_key_hash(key: Any) -> int:
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):
        if -(2**31) <= key < 2**31:  # Integer.hashCode / Long.hashCode agree here
            return key & 0xFFFFFFFF
        v = key & 0xFFFFFFFFFFFFFFFF
        return (v ^ (v >> 32)) & 0xFFFFFFFF
    return java_string_hash(str(key))


def _map_order(keys: list[Any]) -> list[Any]:
    mask = hashmap_capacity(len(keys)) - 1

    def bucket(k: Any) -> int:
        h = _java_key_hash(k)
        return (h ^ (h >> 16)) & mask

    return sorted(keys, key=bucket)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(fastjson_quote(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(repr(value))
    elif isinstance(value, Bean):
        out.append("{")
        first = True
        for key in sorted(value):
            item = value[key]
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(fastjson_quote(key))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, Mapping):
        out.append("{")
        first = True
        for key in _map_order([k for k, v in value.items() if v is not None]):
            if not first:
                out.append(",")
            first = False
            if isinstance(key, int) and not isinstance(key, bool):
                out.append(str(key))  # fastjson leaves numeric keys unquoted
            else:
                out.append(fastjson_quote(str(key)))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as a RocketMQ body")


def dumps(value: Any) -> str:
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def dumps_bytes(value: Any) -> bytes:
    return dumps(value).encode("utf-8")


# Unquoted numeric keys are quoted with a NUL marker in front (escaped, so the text
# stays JSON) and turned back into ints by the object hook. A real key that itself
# starts with NUL gets a second marker, so nothing is misread. String tokens are
# matched first, so digits inside strings are never touched.
_TOKENS = re.compile(r'("(?:[^"\\]|\\.)*")(\s*:)?|([{,]\s*)(-?\d+)(\s*:)', re.S)
_NUL = "\\u0000"


def _quote_numeric_keys(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            if m.group(2) is not None and m.group(1).startswith('"' + _NUL):
                return '"' + _NUL + m.group(0)[1:]
            return m.group(0)
        return f'{m.group(3)}"{_NUL}{m.group(4)}"{m.group(5)}'

    return _TOKENS.sub(fix, text)


def _int_keys(obj: dict[str, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in obj.items():
        if k.startswith("\x00"):
            k = k[1:] if k.startswith("\x00\x00") else int(k[1:])
        out[k] = v
    return out


def loads(data: bytes | str) -> Any:
    """Parse a body; unquoted numeric keys become ``int`` keys."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyDecodeError(f"body is not valid UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(_quote_numeric_keys(text), object_hook=_int_keys)
    except (ValueError, RecursionError) as exc:
        raise BodyDecodeError(f"body is not JSON: {exc}") from None
