"""SQL92 message selectors as RocketMQ 4.9.8 parses and evaluates them (``SqlFilter``).

Pure: an expression string in, a :class:`CompiledFilter` out, which tells whether a
message's properties (a ``{name: value}`` mapping of strings: the user's and the system
ones, ``TAGS``, ``KEYS``, ... as the stored record holds them) match. What Java refuses
raises :class:`FilterCompileError`, whose :attr:`~FilterCompileError.remark` is the text
the Java broker answers (``MQFilterException.getMessage()``: the cause's
``toString()``, e.g. ``java.lang.RuntimeException: 'NULL' cannot be compared.``).

* :mod:`.grammar`: the grammar (lark, LALR) and JavaCC's error texts;
* :mod:`.nodes`: the expression tree and the checks Java runs while building it;
* :mod:`.evaluate`: the tree as closures with Java's null handling and coercions;
* :mod:`.codegen`: the same rules as one generated function of the properties string;
* :mod:`.java`: Java's values, string conversions, ``compareTo`` and ``toString``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .codegen import generate
from .evaluate import compile_node, property_names
from .grammar import TokenMgrError, parse
from .java import JavaError
from .nodes import Node, ParseError

__all__ = ["CompiledFilter", "FilterCompileError", "compile_filter"]


class FilterCompileError(ValueError):
    """Java's ``MQFilterException("Invalid MessageSelector. ", cause)``."""

    def __init__(self, expression: str, remark: str) -> None:
        super().__init__(f"invalid SQL92 expression {expression!r}: {remark}")
        self.expression = expression
        #: what the Java broker answers (SUBSCRIPTION_PARSE_FAILED's remark)
        self.remark = remark


class CompiledFilter:
    """A parsed expression, ready to test messages."""

    __slots__ = ("expression", "tree", "evaluator", "names", "evaluate_text", "source", "_evaluate")

    def __init__(self, expression: str, tree: Node) -> None:
        self.expression = expression
        self.tree = tree
        #: the closure behind :meth:`evaluate` (hot paths call it directly)
        self.evaluator = self._evaluate = compile_node(tree)
        #: the property names the expression reads, in order of appearance
        self.names: tuple[str, ...] = tuple(dict.fromkeys(property_names(tree)))
        #: the same evaluation as one generated function of the properties *string*
        #: (:mod:`.codegen`: the broker's pull path); ``source`` is its code
        self.evaluate_text, self.source = generate(tree, self.names)

    def evaluate(self, properties: Mapping[str, str]) -> object:
        """The raw result: ``True``, ``False`` or ``None`` (unknown); raises
        :class:`~.java.JavaError` where Java's evaluation throws."""
        return self._evaluate(properties)

    def matches(self, properties: Mapping[str, str]) -> bool:
        """``ExpressionMessageFilter.isMatchedByCommitLog``: true only for a TRUE result;
        unknown and any evaluation error are no match."""
        try:
            return self._evaluate(properties) is True
        except Exception:  # Java catches Throwable here: a bad value never breaks the pull
            return False

    def __str__(self) -> str:
        """Java's ``toString()`` of the compiled expression."""
        return str(self.tree)

    def __repr__(self) -> str:
        return f"CompiledFilter({self.expression!r})"


def compile_filter(expression: str) -> CompiledFilter:
    """``SqlFilter.compile``: the expression parsed and checked, or
    :class:`FilterCompileError` with Java's remark."""
    try:
        tree = parse(expression)
    except (JavaError, ParseError, TokenMgrError) as exc:
        raise FilterCompileError(expression, str(exc)) from None
    except RecursionError:
        raise FilterCompileError(expression, "java.lang.StackOverflowError") from None
    return CompiledFilter(expression, tree)
