"""Java scalar rules for custom-header values: parse and format, shared by both paths.

Every ext-field value is a string on the wire. These functions are the single source of
truth for turning such a string into an ``int`` / ``bool`` / ``float`` and back, and
for the wording of errors. The generic path uses them for every value; the hand-written
fast path inlines only values that are valid by construction (a table of canonical
small ints, a short run of ASCII digits, the spellings in :data:`BOOLS`) and hands
anything else to the generic path, so the two cannot drift apart.

Parsing is deliberately *strict* and identical on both paths:

* int / long: what ``Integer.parseInt`` / ``Long.parseLong`` accept, restricted to ASCII:
  an optional ``+``/``-`` sign, one or more ASCII digits (leading zeros allowed), nothing
  else (no whitespace, no underscores, no non-ASCII digits such as ``"٣"`` which Java's
  ``Character.digit`` would take), in range for int32 / int64.
* bool: ``"true"`` / ``"false"`` ASCII-case-insensitively, and ``"1"`` / ``"0"`` (the C++
  client sends ``batch: "1"``). Anything else is an error, where Java's
  ``Boolean.parseBoolean`` would silently answer ``false``.
* double: Java's decimal floating literal grammar (``Double.parseDouble``): sign, digits
  with an optional point, optional exponent, optional ``f``/``F``/``d``/``D`` suffix,
  ``NaN``, ``Infinity``. Not accepted (Java accepts them): surrounding whitespace, which
  Java trims, and hexadecimal literals (``0x1p3``).

Formatting follows Java's ``toString``: ``Integer``/``Long`` decimal, ``Boolean``
``"true"``/``"false"``, ``Double`` via :func:`format_double`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from ..errors import CustomHeaderError
from ..java_ints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

__all__ = [
    "KINDS",
    "BOOLS",
    "parse_int32",
    "parse_int64",
    "parse_bool",
    "parse_double",
    "format_bool",
    "format_double",
    "format_int",
    "missing",
    "value_error",
]


#: Field kinds and the Java types they stand for.
KINDS = {
    "str": "String",
    "int": "Integer",  # int32
    "long": "Long",  # int64
    "bool": "Boolean",
    "double": "Double",
}

#: Exact spellings looked up before any case folding; the fast path uses it inline.
BOOLS: dict[str, bool] = {
    "true": True,
    "false": False,
    "1": True,
    "0": False,
    "True": True,
    "False": False,
    "TRUE": True,
    "FALSE": False,
}
_BOOLS_FOLDED = {"true": True, "false": False, "1": True, "0": False}


def _text(s: object, expected: str) -> str:
    """``s`` as a plain ``str`` (a str subclass counts as its text); any other type is
    an error naming what was expected, in user terms."""
    if isinstance(s, str):
        return str(s)
    raise ValueError(f"expected a string holding {expected}, got {type(s).__name__} {s!r}")


def _parse_int(s: str, lo: int, hi: int, java: str) -> int:
    if type(s) is not str:
        s = _text(s, f"an integer (Java {java})")
    body = s[1:] if s.startswith(("+", "-")) else s
    if not (body.isascii() and body.isdigit()):
        raise ValueError(f"expected an integer (Java {java}: optional sign, ASCII digits)")
    if len(body) > 19:
        # Python caps int() at 4300 digits; Java happily skips any number of leading zeros.
        body = body.lstrip("0") or "0"
        if len(body) > 19:
            raise ValueError(f"out of range for Java {java} ({lo}..{hi})")
    value = int(body)
    if s[0] == "-":
        value = -value
    if not lo <= value <= hi:
        raise ValueError(f"out of range for Java {java} ({lo}..{hi})")
    return value


def parse_int32(s: str) -> int:
    """``Integer.parseInt``, strict (see the module docstring). Raises ``ValueError``."""
    return _parse_int(s, INT32_MIN, INT32_MAX, "Integer")


def parse_int64(s: str) -> int:
    """``Long.parseLong``, strict (see the module docstring). Raises ``ValueError``."""
    return _parse_int(s, INT64_MIN, INT64_MAX, "Long")


def parse_bool(s: str) -> bool:
    """``true``/``false`` (ASCII case-insensitive) or ``1``/``0``. Raises ``ValueError``."""
    value = BOOLS.get(s) if type(s) is str else None
    if value is None:
        if type(s) is not str:
            s = _text(s, "a boolean")
            value = BOOLS.get(s)
        if value is None and s.isascii():
            value = _BOOLS_FOLDED.get(s.lower())
        if value is None:
            raise ValueError('expected a boolean ("true", "false", "1" or "0")')
    return value


_DOUBLE_RE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)


def parse_double(s: str) -> float:
    """``Double.parseDouble`` for decimal literals (no whitespace, no hex). Raises ``ValueError``."""
    if type(s) is not str:
        s = _text(s, "a decimal number (Java Double)")
    if _DOUBLE_RE.fullmatch(s) is None:
        raise ValueError("expected a decimal number (Java Double, as Double.parseDouble reads it)")
    if s[-1] in "fFdD" and not s.endswith("Infinity"):
        s = s[:-1]
    return float(s)


def format_int(value: int) -> str:
    """``Integer.toString`` / ``Long.toString``."""
    return str(int(value))


def format_bool(value: bool) -> str:
    """``Boolean.toString``."""
    return "true" if value else "false"


def format_double(value: float) -> str:
    """``Double.toString`` for the shortest round-tripping digits.

    Matches Java for every value whose Java output is the shortest decimal that
    round-trips, which is all of them on JDK 19+ (JDK-4511638 fixed). Older JDKs
    (RocketMQ 4.9.8 usually runs on 8) sometimes print one or more extra digits, e.g.
    ``2.0E-3`` as ``0.0020`` on JDK 8; those outputs are not reproduced. Where the
    shortest has one digit, the two-digit decimal nearest the exact value is used, as
    Java does (``Double.MIN_VALUE`` is ``4.9E-324``). Layout rules:
    ``NaN``, ``Infinity``, ``-Infinity``, ``0.0``/``-0.0``; plain decimal with at least
    one fraction digit for 1e-3 <= |x| < 1e7; otherwise ``d.dddE<exp>``.
    """
    x = float(value)
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    ax = abs(x)
    text = repr(ax)  # shortest round-tripping digits
    mantissa, _, exp_text = text.partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    exp -= len(frac_part)  # value == int(digits) * 10**exp
    stripped = digits.lstrip("0")
    trimmed = stripped.rstrip("0")
    exp += len(stripped) - len(trimmed)
    digits = trimmed
    sci = len(digits) - 1 + exp  # value == d.ddd * 10**sci
    if len(digits) == 1:
        # Java prints at least two digits and picks the two-digit decimal closest to the
        # exact binary value: that differs from "d.0" only for some subnormals, e.g.
        # Double.MIN_VALUE is "4.9E-324" (5e-324 is shorter, 4.9e-324 is closer).
        two, _, two_exp = format(Decimal(ax), ".1e").partition("e")
        if float(f"{two}e{two_exp}") == ax:
            two_digits = two.replace(".", "").rstrip("0")
            if two_digits:
                digits, sci = two_digits, int(two_exp)
    if 1e-3 <= ax < 1e7:
        if sci >= 0:
            whole = digits[: sci + 1].ljust(sci + 1, "0")
            frac = digits[sci + 1 :] or "0"
        else:
            whole = "0"
            frac = "0" * (-sci - 1) + digits
        return f"{sign}{whole}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci}"


# -- errors (one wording for both paths) ----------------------------------------------


def missing(header: str, field: str) -> CustomHeaderError:
    """The error for a required field that is absent or null (Java's wording)."""
    return CustomHeaderError(header, field, f"the custom field <{field}> is null")


def value_error(header: str, field: str, value: Any, exc: ValueError) -> CustomHeaderError:
    """The error for a value that does not parse; names the field and the value."""
    return CustomHeaderError(header, field, f"cannot parse {value!r}: {exc}")
