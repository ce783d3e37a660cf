"""The Java values of RocketMQ 4.9.8's SQL92 filter and the conversions between them.

The filter module (``org.apache.rocketmq.filter.expression``) evaluates over Java
objects: ``Integer``, ``Long``, ``Double``, ``Boolean``, ``String`` and ``null``. Here
they are Python's ``int`` (an ``Integer``), :class:`JLong` (a ``Long``: an ``int``
subclass, so only the string conversion tells them apart), ``float``, ``bool``, ``str``
and ``None``. A message property is always a ``String``; the constants of the
expression carry the other types.

:func:`java_compare` is ``ComparisonExpression.__compare`` with
``convertStringExpressions`` on (``SelectorParser.parse`` always sets it): a ``String``
met by a number or a boolean is converted with Java's ``Integer.valueOf`` /
``Long.valueOf`` / ``Double.valueOf`` / ``Boolean.valueOf`` rules, which are stricter
than Python's ``int()`` and ``float()`` (no surrounding blanks for integers, no
underscores, ``Infinity`` not ``inf``, a ``d``/``f`` suffix allowed for doubles).
A conversion that fails raises :class:`JavaError`, which the broker's filter turns
into "no match", as Java's ``ExpressionMessageFilter`` does with any exception.
"""

from __future__ import annotations

import math
import re
import struct

from trocket.codecs.custom_header._java import format_double
from trocket.codecs.java_ints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

__all__ = [
    "JLong",
    "JavaError",
    "java_compare",
    "java_double_str",
    "java_str",
    "parse_double",
    "parse_int",
    "parse_long",
]


class JLong(int):
    """A Java ``Long`` (a plain ``int`` is a Java ``Integer``)."""

    __slots__ = ()


class JavaError(Exception):
    """A Java exception: ``str()`` is its ``toString()`` (``class: message``)."""

    def __init__(self, java_class: str, message: str | None) -> None:
        super().__init__(java_class if message is None else f"{java_class}: {message}")
        self.java_class = java_class
        self.message = message


def runtime_error(message: str) -> JavaError:
    return JavaError("java.lang.RuntimeException", message)


def number_format(text: str) -> JavaError:
    return JavaError("java.lang.NumberFormatException", f'For input string: "{text}"')


# -- String -> number, as java.lang ---------------------------------------------------------

_INTEGER = re.compile(r"[+-]?\d+\Z")  # Character.digit(c, 10): any Unicode decimal digit
# FloatingDecimal.readJavaFormatString, after String.trim(): ASCII digits only
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)\Z", re.ASCII)
_HEX_DOUBLE = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]*\.?[0-9a-fA-F]*)[pP]([+-]?\d+)[fFdD]?\Z", re.ASCII)


def _parse_integral(text: str, lo: int, hi: int) -> int:
    if not _INTEGER.match(text):
        raise number_format(text)
    value = int(text)
    if not lo <= value <= hi:
        raise number_format(text)
    return value


def parse_int(text: str) -> int:
    """``Integer.valueOf(String)``."""
    return _parse_integral(text, INT32_MIN, INT32_MAX)


def parse_long(text: str) -> JLong:
    """``Long.valueOf(String)``."""
    return JLong(_parse_integral(text, INT64_MIN, INT64_MAX))


def _java_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_double(text: str) -> float:
    """``Double.valueOf(String)``."""
    s = _java_trim(text)
    if _DOUBLE.match(s):
        body = s.rstrip("fFdD") if s[-1:] in "fFdD" and "Infinity" not in s else s
        if body.endswith("NaN"):
            return math.nan
        if body.endswith("Infinity"):
            return -math.inf if body.startswith("-") else math.inf
        return float(body)
    m = _HEX_DOUBLE.match(s)
    if m and m.group(2) not in ("", "."):
        return float.fromhex(f"{m.group(1)}0x{m.group(2)}p{m.group(3)}")
    raise JavaError("java.lang.NumberFormatException", f'For input string: "{s}"' if s else "empty String")


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf(String)``."""
    return text.lower() == "true"


# -- compareTo ----------------------------------------------------------------------------

_BITS = struct.Struct(">d")
_LONG = struct.Struct(">q")


def _double_bits(d: float) -> int:
    if d != d:
        return 0x7FF8000000000000  # doubleToLongBits: every NaN is the canonical one
    return _LONG.unpack(_BITS.pack(d))[0]


def _compare_doubles(a: float, b: float) -> int:
    """``Double.compare``: -0.0 < 0.0, NaN above everything and equal to itself."""
    if a < b:
        return -1
    if a > b:
        return 1
    x, y = _double_bits(a), _double_bits(b)
    return 0 if x == y else (-1 if x < y else 1)


def _compare_same(lv: object, rv: object) -> int:
    if type(lv) is float:
        return _compare_doubles(lv, rv)  # type: ignore[arg-type]
    return -1 if lv < rv else (1 if lv > rv else 0)  # type: ignore[operator]


def java_compare(lv: object, rv: object) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)``: both non-null."""
    lc, rc = type(lv), type(rv)
    if lc is not rc:
        if lc is bool:
            if rc is str:
                # Java: lv = Boolean.valueOf((String) lv) on a Boolean: a ClassCastException
                raise JavaError("java.lang.ClassCastException",
                                "class java.lang.Boolean cannot be cast to class java.lang.String (java.lang.Boolean and "
                                "java.lang.String are in module java.base of loader 'bootstrap')")
            return -1
        if lc is int:
            if rc is JLong:
                pass
            elif rc is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rc is str:
                rv = parse_int(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is JLong:
            if rc is int:
                pass
            elif rc is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rc is str:
                rv = parse_long(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is float:
            if rc is int or rc is JLong:
                rv = float(rv)  # type: ignore[arg-type]
            elif rc is str:
                rv = parse_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is str:
            if rc is bool:
                lv = parse_boolean(lv)  # type: ignore[arg-type]
            elif rc is int:
                lv = parse_int(lv)  # type: ignore[arg-type]
            elif rc is JLong:
                lv = parse_long(lv)  # type: ignore[arg-type]
            elif rc is float:
                lv = parse_double(lv)  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    return _compare_same(lv, rv)


# -- toString -------------------------------------------------------------------------------


def java_double_str(d: float) -> str:
    """``Double.toString`` (the header codecs' :func:`~trocket.codecs.custom_header._java.format_double`)."""
    return format_double(d)


def java_str(value: object) -> str:
    """``String.valueOf`` of a filter value (``%s`` in Java's messages)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        return java_double_str(value)
    return str(int(value)) if isinstance(value, int) else str(value)
