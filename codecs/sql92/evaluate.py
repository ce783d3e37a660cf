"""Evaluating a parsed SQL92 expression over a message's properties, as Java 4.9.8 does.

The tree is turned into nested closures once (:func:`compile_node`), each a function of
the properties mapping (``{name: value}``, every value a string) returning a Java
value: ``True``/``False``/``None`` for boolean nodes (SQL's three-valued logic: ``None``
is unknown), numbers and strings for the rest. The rules are the evaluators of
``ComparisonExpression``, ``LogicExpression`` and ``UnaryExpression``:

* ``=``: one side null -> unknown if the left one is, else false; both null -> true
  (so ``IS NULL`` is ``= NULL`` and a missing ``a = b`` pair is equal); else
  :func:`~.java.java_compare` is 0 (a string meeting a number is converted).
* ``> >= < <=``: either side null -> unknown; two strings are compared as doubles.
* ``AND``/``OR``: short-circuit on a known false/true, unknown otherwise contaminates.
* ``NOT`` keeps unknown; ``-`` of a non-number is unknown; ``IN`` of a non-string is
  unknown; a bare property as a condition is true only for a ``Boolean`` (never for a
  message property, which is a string).

A conversion that fails (``a > 5`` with ``a = 'x'``) raises
:class:`~.java.JavaError` through the whole evaluation: the message does not match,
even under an ``OR`` whose other side is true, exactly as Java.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping

from trocket.codecs.java_ints import INT32_MIN

from .java import JLong, JavaError, _compare_doubles, java_compare, parse_double, parse_int, parse_long
from .nodes import Binary, Constant, In, Node, Property, Unary

__all__ = ["Evaluator", "compile_node", "property_names"]

Props = Mapping[str, str]
Evaluator = Callable[[Props], object]

_LONG_MIN = -(1 << 63)


def _equal(lv: object, rv: object) -> bool | None:
    if lv is None:
        return True if rv is None else None
    if rv is None:
        return False
    if type(lv) is type(rv) and type(lv) is not float:
        return lv == rv
    return java_compare(lv, rv) == 0


def _order(lv: object, rv: object) -> int:
    if type(lv) is str and type(rv) is str:
        try:
            return _compare_doubles(parse_double(lv), parse_double(rv))
        except JavaError as exc:
            raise JavaError("java.lang.RuntimeException",
                            f"It's illegal to compare string by '>=', '>', '<', '<='. lv={lv}, rv={rv}") from exc
    return java_compare(lv, rv)


def _negate(v: object) -> object:
    t = type(v)
    if t is int:
        return v if v == INT32_MIN else -v  # type: ignore[operator]
    if t is JLong:
        return v if v == _LONG_MIN else JLong(-v)  # type: ignore[operator]
    if t is float:
        return -v  # type: ignore[operator]
    return None


_SIMPLE_DOUBLE = frozenset("0123456789.eE+-")

#: ``op`` between two numbers of one type (the result of java_compare tested against 0)
_NUMBER_OPS: dict[str, Callable[[object, object], bool]] = {
    "==": operator.eq, ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}


def _as_int(v: str) -> int:
    """``Integer.valueOf``: plain ASCII digits take the short way."""
    if v.isascii() and v.isdigit() and len(v) < 10:
        return int(v)
    return parse_int(v)


def _as_long(v: str) -> int:
    """``Long.valueOf``."""
    if v.isascii() and v.isdigit() and len(v) < 19:
        return int(v)
    return parse_long(v)


def _as_double(v: str) -> float:
    """``Double.valueOf``: for text of digits, ``.``, exponent and signs only, Python's
    ``float`` accepts and refuses exactly what Java does, and never gives NaN."""
    if _SIMPLE_DOUBLE.issuperset(v):
        try:
            return float(v)
        except ValueError:
            pass
    return parse_double(v)


def _prop_vs_constant(op: str, name: str, const: object) -> Evaluator | None:
    """``prop <op> constant``, the common shape, in one closure: the property's string
    converted to the constant's type as ``__compare`` would, then compared. (A Double
    constant is never 0 nor NaN -- ``createFloat`` refuses those, a negative one is a
    negation, not a constant -- so plain float comparison is ``Double.compare``.)"""
    compare = _NUMBER_OPS[op]
    t = type(const)
    if t is str:
        if op != "==":
            return None

        def str_eq(props: Props) -> object:
            v = props.get(name)
            return None if v is None else v == const

        return str_eq
    if t is bool:
        if op != "==":
            return None

        def bool_eq(props: Props) -> object:
            v = props.get(name)
            return None if v is None else (v.lower() == "true") is const  # type: ignore[union-attr]

        return bool_eq
    if t is float:

        def double(props: Props) -> object:
            v = props.get(name)
            if v is None:
                return None
            x = _as_double(v) if type(v) is str else v
            if type(x) is not float or x != x:  # NaN: Double.compare puts it above everything
                return compare(java_compare(x, const), 0)
            return compare(x, const)

        return double
    convert = _as_int if t is int else _as_long if t is JLong else None
    if convert is None:
        return None

    def number(props: Props) -> object:
        v = props.get(name)
        if v is None:
            return None
        if type(v) is not str:
            return compare(java_compare(v, const), 0)
        return compare(convert(v), const)

    return number


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def property_names(node: Node) -> Iterator[str]:
    """The property names ``node`` reads (repeats included)."""
    t = type(node)
    if t is Property:
        yield node.name  # type: ignore[attr-defined]
    elif t is In:
        yield node.prop.name  # type: ignore[attr-defined]
    elif t is Unary:
        yield from property_names(node.operand)  # type: ignore[attr-defined]
    elif t is Binary:
        yield from property_names(node.left)  # type: ignore[attr-defined]
        yield from property_names(node.right)  # type: ignore[attr-defined]


def compile_node(node: Node) -> Evaluator:
    """Closures for ``node`` (see the module's rules)."""
    t = type(node)
    if t is Constant:
        value = node.value  # type: ignore[attr-defined]
        return lambda props: value
    if t is Property:
        name = node.name  # type: ignore[attr-defined]
        return lambda props: props.get(name)
    if t is In:
        name = node.prop.name  # type: ignore[attr-defined]
        values = frozenset(node.values)  # type: ignore[attr-defined]
        negated = node.negated  # type: ignore[attr-defined]

        def in_(props: Props) -> object:
            v = props.get(name)
            if v is None or type(v) is not str:
                return None
            return (v in values) is not negated

        return in_
    if t is Unary:
        return _compile_unary(node)  # type: ignore[arg-type]
    return _compile_binary(node)  # type: ignore[arg-type]


def _compile_unary(node: Unary) -> Evaluator:
    inner = compile_node(node.operand)
    if node.op == "-":
        return lambda props: _negate(inner(props))
    if node.op == "NOT":

        def not_(props: Props) -> object:
            v = inner(props)
            return None if v is None else not v

        return not_

    def cast(props: Props) -> object:
        v = inner(props)
        if v is None:
            return None
        return v if type(v) is bool else False

    return cast


def _compile_binary(node: Binary) -> Evaluator:
    left, right = compile_node(node.left), compile_node(node.right)
    op = node.op
    if op == "&&":

        def and_(props: Props) -> object:
            lv = left(props)
            if lv is False:
                return False
            rv = right(props)
            if rv is False:
                return False
            if lv is None or rv is None:
                return None
            return True

        return and_
    if op == "||":

        def or_(props: Props) -> object:
            lv = left(props)
            if lv is True:
                return True
            rv = right(props)
            if rv is True:
                return True
            if lv is None or rv is None:
                return None
            return False

        return or_
    if type(node.left) is Property and type(node.right) is Constant:
        fast = _prop_vs_constant(op, node.left.name, node.right.value)
        if fast is not None:
            return fast
    if op == "==":
        return lambda props: _equal(left(props), right(props))
    test = _ORDER_TESTS[op]

    def order(props: Props) -> object:
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        return test(_order(lv, rv))

    return order
