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

from collections.abc import Callable, Mapping

from .java import INT_MIN, JLong, JavaError, _compare_doubles, java_compare, parse_double
from .nodes import Binary, Constant, In, Node, Property, Unary

__all__ = ["Evaluator", "compile_node"]

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
        return v if v == INT_MIN else -v  # type: ignore[operator]
    if t is JLong:
        return v if v == _LONG_MIN else JLong(-v)  # type: ignore[operator]
    if t is float:
        return -v  # type: ignore[operator]
    return None


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


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
    if op == "==":
        return lambda props: _equal(left(props), right(props))
    test = _ORDER_TESTS[op]
    if type(node.right) is Constant and type(node.left) is Property:
        # the common shape, ``prop > 5``: one call less per message
        name, const = node.left.name, node.right.value
        if type(const) is int:  # Integer.valueOf on the property, as java_compare would

            def prop_vs_int(props: Props) -> object:
                v = props.get(name)
                if v is None:
                    return None
                return test(java_compare(v, const))

            return prop_vs_int

    def order(props: Props) -> object:
        lv = left(props)
        if lv is None:
            return None
        rv = right(props)
        if rv is None:
            return None
        return test(_order(lv, rv))

    return order
