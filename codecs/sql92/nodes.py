"""The expression tree of RocketMQ 4.9.8's SQL92 filter, built as its parser builds it.

Each node is one of Java's expression classes (``ConstantExpression``,
``PropertyExpression``, ``ComparisonExpression``, ``LogicExpression``,
``UnaryExpression`` and its ``IN`` / ``NOT`` / boolean-cast forms), with the same
``toString()`` (Java's error messages quote it) and the same checks at creation
(``createBetween``, ``checkLessThanOperand``, ``checkEqualOperand``, ...), which raise
:class:`~trocket.codecs.sql92.java.JavaError` with Java's exception and message. The
parser (:mod:`.grammar`) calls the ``create_*`` functions in the order Java's does, so
the first error is the one Java reports.
"""

from __future__ import annotations

from .java import JavaError, java_compare, java_double_str, java_str, runtime_error

__all__ = [
    "Binary",
    "Constant",
    "In",
    "Node",
    "Property",
    "Unary",
    "as_boolean",
]


class Node:
    """An ``Expression``; ``boolean`` says whether Java's class is a ``BooleanExpression``."""

    __slots__ = ()
    boolean = False


class Constant(Node):
    """``ConstantExpression``; TRUE, FALSE and NULL are ``BooleanConstantExpression``."""

    __slots__ = ("value", "boolean")

    def __init__(self, value: object, boolean: bool = False) -> None:
        self.value = value
        self.boolean = boolean

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if type(v) is bool:
            return "TRUE" if v else "FALSE"
        if type(v) is str:
            return "'" + v.replace("'", "''") + "'"
        if type(v) is float:
            return java_double_str(v)
        return str(int(v))  # type: ignore[call-overload]


class Property(Node):
    """``PropertyExpression``: a message property by name (case kept)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return self.name


class Binary(Node):
    """``ComparisonExpression`` (``==``, ``>``, ``>=``, ``<``, ``<=``) or
    ``LogicExpression`` (``&&``, ``||``)."""

    __slots__ = ("op", "left", "right")
    boolean = True

    def __init__(self, op: str, left: Node, right: Node) -> None:
        self.op = op
        self.left = left
        self.right = right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


class Unary(Node):
    """``UnaryExpression``: ``-`` (negate, not boolean), ``NOT``, and the boolean cast
    of a bare property (``createBooleanCast``: printed as the property)."""

    __slots__ = ("op", "operand", "boolean")

    def __init__(self, op: str, operand: Node) -> None:
        self.op = op
        self.operand = operand
        self.boolean = op != "-"

    def __str__(self) -> str:
        if self.op == "cast":
            return str(self.operand)
        return f"({self.op} {self.operand})"


class In(Node):
    """``UnaryInExpression``: a property ``[NOT] IN`` string literals."""

    __slots__ = ("prop", "values", "negated")
    boolean = True

    def __init__(self, prop: Property, values: list[str], negated: bool) -> None:
        self.prop = prop
        self.values = values
        self.negated = negated

    def __str__(self) -> str:
        return f"{self.prop} {'NOT IN' if self.negated else 'IN'} ( {', '.join(self.values)} )"


class ParseError(Exception):
    """``org.apache.rocketmq.filter.parser.ParseException`` (its ``toString()``)."""

    java_class = "org.apache.rocketmq.filter.parser.ParseException"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.java_class}: {message}")


# -- SelectorParser.asBooleanExpression and the ComparisonExpression factories ---------------


def as_boolean(node: Node) -> Node:
    if node.boolean:
        return node
    if type(node) is Property:
        return Unary("cast", node)
    raise ParseError(f"Expression will not result in a boolean value: {node}")


def _check_less_than_operand(node: Node) -> None:
    if type(node) is Constant:
        if isinstance(node.value, (int, float)) and type(node.value) is not bool:
            return
        raise runtime_error(f"Value '{node}' cannot be compared.")
    if node.boolean:
        raise runtime_error(f"Value '{node}' cannot be compared.")


def _check_equal_operand(node: Node) -> None:
    if type(node) is Constant and node.value is None:
        raise runtime_error(f"'{node}' cannot be compared.")


def create_ordering(op: str, left: Node, right: Node) -> Node:
    """``createGreaterThan`` / ``...Equal`` / ``createLessThan`` / ``...Equal``."""
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    return Binary(op, left, right)


def create_equal(left: Node, right: Node) -> Node:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if type(left) is Constant and type(right) is Constant and left.boolean and not right.boolean:
        raise runtime_error(f"'{left}' cannot be compared with '{right}'")
    return Binary("==", left, right)


def create_not_equal(left: Node, right: Node) -> Node:
    return Unary("NOT", create_equal(left, right))


_NULL = Constant(None, boolean=True)


def create_is_null(left: Node) -> Node:
    return Binary("==", left, _NULL)


def create_is_not_null(left: Node) -> Node:
    return Unary("NOT", Binary("==", left, _NULL))


def create_between(value: Node, low: Node, high: Node) -> Node:
    if type(low) is Constant and type(high) is Constant:
        lv, rv = low.value, high.value
        if lv is None or rv is None:
            raise runtime_error("Illegal values of between, values can not be null!")
        try:
            ret = java_compare(rv, lv)
        except JavaError as exc:
            if exc.java_class != "java.lang.NumberFormatException":
                raise
            raise runtime_error(str(exc)) from None  # Java: new RuntimeException(e)
        if ret < 0:
            raise runtime_error(
                f"Illegal values of between, left value({java_str(lv)}) must less than or equal to "
                f"right value({java_str(rv)})"
            )
    return Binary("&&", create_ordering(">=", value, low), create_ordering("<=", value, high))


def create_not_between(value: Node, low: Node, high: Node) -> Node:
    return Binary("||", create_ordering("<", value, low), create_ordering(">", value, high))


def create_in(left: Node, values: list[str], negated: bool) -> Node:
    if type(left) is not Property:
        raise runtime_error(f"Expected a property for In expression, got: {left}")
    return In(left, values, negated)


def create_logic(op: str, left: Node, right: Node) -> Node:
    return Binary(op, as_boolean(left), as_boolean(right))


def create_not(operand: Node) -> Node:
    return Unary("NOT", as_boolean(operand))


def create_negate(operand: Node) -> Node:
    return Unary("-", operand)
