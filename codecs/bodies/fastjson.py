"""JSON as RocketMQ's fastjson writes bodies, and a reader for what it writes.

RocketMQ serializes bodies with ``JSON.toJSONString(obj)``:

- a Java bean's properties in alphabetical order, null ones left out
  (use :class:`Bean`);
- a ``Map`` in its ``HashMap`` iteration order, null values left out, and
  **numeric keys unquoted**: ``{"brokerAddrs":{0:"127.0.0.1:10911"}}``
  (use a plain ``dict``; ``int`` keys are Java ``Long``/``Integer`` keys), and
  **object keys written as objects**: ``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``
  (``ConsumeStats.offsetTable``; a key with ``to_json()`` and ``java_hash()``, such as
  :class:`~.client.MessageQueue`);
- strings escaped as in the command header (see :mod:`..header_json`).

That output is not valid JSON, so :func:`loads` accepts unquoted numeric keys (they
come back as ``int`` keys), as the C++ client's reader (``allowNumericKeys``) and the
JS client's ``JSON2`` do, and object keys (they come back as :class:`ObjectKey`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import CodecError
from ..header_json import fastjson_quote
from ..java_hashmap import hashmap_capacity, java_string_hash

__all__ = ["Bean", "ObjectKey", "dumps", "dumps_bytes", "loads", "BodyDecodeError"]


class BodyDecodeError(CodecError):
    """A JSON body does not parse or does not have the expected shape."""


class Bean(dict):
    """A Java bean: written with its properties sorted by name, nulls left out."""


class ObjectKey(tuple):
    """A map key that was a JSON object (hashable): its ``(name, value)`` pairs, sorted;
    :meth:`as_dict` gives the object back."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


def _java_key_hash(key: Any) -> int:
    java_hash = getattr(key, "java_hash", None)
    if java_hash is not None:
        return java_hash() & 0xFFFFFFFF
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
            elif hasattr(key, "to_json"):
                _write(key.to_json(), out)  # an object key, written as the object
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


# fastjson's extensions of JSON read by a small parser of our own (the standard one
# first: most bodies are plain JSON): numeric keys become ints, object keys ObjectKeys.
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]


class _Parser:
    __slots__ = ("text", "depth")

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0

    def error(self, at: int, what: str) -> BodyDecodeError:
        return BodyDecodeError(f"body is not JSON: {what} at char {at}")

    def ws(self, at: int) -> int:
        return _WS.match(self.text, at).end()  # type: ignore[union-attr]

    def value(self, at: int) -> tuple[Any, int]:
        text = self.text
        at = self.ws(at)
        if at >= len(text):
            raise self.error(at, "unexpected end")
        ch = text[at]
        if ch == "{":
            return self.object(at + 1)
        if ch == "[":
            return self.array(at + 1)
        if ch == '"':
            return _scanstring(text, at + 1)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, at):
                return val, at + len(word)
        m = _NUMBER.match(text, at)
        if m is None:
            raise self.error(at, f"unexpected {ch!r}")
        number = m.group(0)
        return (float(number) if m.group(1) or m.group(2) else int(number)), m.end()

    def nest(self, at: int) -> None:
        self.depth += 1
        if self.depth > 500:
            raise self.error(at, "too deeply nested")

    def object(self, at: int) -> tuple[dict[Any, Any], int]:
        self.nest(at)
        text = self.text
        out: dict[Any, Any] = {}
        at = self.ws(at)
        if text.startswith("}", at):
            self.depth -= 1
            return out, at + 1
        while True:
            key, at = self.value(at)
            if isinstance(key, dict):
                key = ObjectKey(sorted(key.items(), key=lambda kv: str(kv[0])))
            elif isinstance(key, (list, float)) or key is None or isinstance(key, bool):
                raise self.error(at, "a key that cannot be a map key")
            at = self.ws(at)
            if not text.startswith(":", at):
                raise self.error(at, "':' expected")
            out[key], at = self.value(at + 1)
            at = self.ws(at)
            if text.startswith(",", at):
                at += 1
                continue
            if text.startswith("}", at):
                self.depth -= 1
                return out, at + 1
            raise self.error(at, "',' or '}' expected")

    def array(self, at: int) -> tuple[list[Any], int]:
        self.nest(at)
        text = self.text
        out: list[Any] = []
        at = self.ws(at)
        if text.startswith("]", at):
            self.depth -= 1
            return out, at + 1
        while True:
            item, at = self.value(at)
            out.append(item)
            at = self.ws(at)
            if text.startswith(",", at):
                at += 1
                continue
            if text.startswith("]", at):
                self.depth -= 1
                return out, at + 1
            raise self.error(at, "',' or ']' expected")


def loads(data: bytes | str) -> Any:
    """Parse a body; unquoted numeric keys become ``int`` keys, object keys
    :class:`ObjectKey` keys."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyDecodeError(f"body is not valid UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    parser = _Parser(text)
    try:
        value, at = parser.value(0)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, BodyDecodeError):
            raise
        raise BodyDecodeError(f"body is not JSON: {exc}") from None
    if parser.ws(at) != len(text):
        raise parser.error(at, "extra data")
    return value
