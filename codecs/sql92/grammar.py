"""RocketMQ 4.9.8's SQL92 selector grammar (``SelectorParser.jj``) on lark's LALR parser.

The tokens are JavaCC's, case-insensitive: keywords ``NOT AND OR BETWEEN IN TRUE FALSE
NULL IS``; ``DECIMAL_LITERAL`` (``0`` or ``[1-9][0-9]*`` with an optional ``l``/``L``),
``FLOATING_POINT_LITERAL`` (``5.5``, ``5.``, ``.5``, ``5E10``), ``STRING_LITERAL`` (single
quotes, ``''`` inside), ``ID`` (``[a-z_$][a-z0-9_$]*``); blanks, ``-- ...`` and
``/* ... */`` skipped. The rules and their precedence are the ``.jj``'s, written
left-recursive so that each node is built (and its checks run) when JavaCC's action
would run: ``OR`` < ``AND`` < ``=``/``<>``/``IS [NOT] NULL`` < ``> >= < <=``/``[NOT]
BETWEEN``/``[NOT] IN (strings)`` < unary ``+ - NOT`` < literal, property, parentheses.

Two JavaCC behaviours kept on purpose, since Java clients rely on what Java accepts:
the parser stops at the first token that cannot continue the expression, and if what
came before is a whole expression, that is the result (``a > 5 b`` is ``a > 5``); and
the errors are JavaCC's ``ParseException`` / ``TokenMgrError`` texts (``Encountered ...
at line L, column C.`` with the expected tokens in JavaCC's order and images), since the
broker answers them as the remark of SUBSCRIPTION_PARSE_FAILED.
"""

from __future__ import annotations

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from . import nodes
from trocket.codecs.java_ints import INT32_MAX, INT32_MIN, INT64_MAX

from .java import JLong, number_format, runtime_error
from .nodes import Constant, Node, ParseError, Property

__all__ = ["TokenMgrError", "parse"]

GRAMMAR = r"""
start: or_expr

?or_expr: and_expr
    | or_expr _OR and_expr                        -> or_

?and_expr: eq_expr
    | and_expr _AND eq_expr                       -> and_

?eq_expr: cmp_expr
    | eq_expr _EQ cmp_expr                        -> eq
    | eq_expr _NE cmp_expr                        -> ne
    | eq_expr _IS NULL                            -> is_null
    | eq_expr _IS _NOT NULL                       -> is_not_null

?cmp_expr: unary
    | cmp_expr _GT unary                          -> gt
    | cmp_expr _GE unary                          -> ge
    | cmp_expr _LT unary                          -> lt
    | cmp_expr _LE unary                          -> le
    | cmp_expr _BETWEEN unary _AND unary          -> between
    | cmp_expr _NOT _BETWEEN unary _AND unary     -> not_between
    | cmp_expr _IN _LPAR strings _RPAR            -> in_
    | cmp_expr _NOT _IN _LPAR strings _RPAR       -> not_in

strings: STRING (_COMMA STRING)*

?unary: primary
    | _PLUS unary
    | _MINUS unary                                -> neg
    | _NOT unary                                  -> not_

?primary: STRING                                  -> string
    | DECIMAL                                     -> decimal
    | FLOAT                                       -> float_
    | TRUE                                        -> true
    | FALSE                                       -> false
    | NULL                                        -> null
    | ID                                          -> prop
    | _LPAR or_expr _RPAR

_NOT: "NOT"i
_AND: "AND"i
_OR: "OR"i
_BETWEEN: "BETWEEN"i
_IN: "IN"i
TRUE: "TRUE"i
FALSE: "FALSE"i
NULL: "NULL"i
_IS: "IS"i
DECIMAL: /0|[1-9][0-9]*[lL]?/
FLOAT.2: /[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
STRING: /'(?:''|[^'])*'/
ID: /[a-z_$][a-z0-9_$]*/i
_EQ: "="
_NE: "<>"
_GT: ">"
_GE: ">="
_LT: "<"
_LE: "<="
_LPAR: "("
_COMMA: ","
_RPAR: ")"
_PLUS: "+"
_MINUS: "-"

LINE_COMMENT.3: /--[^\n\r]*/
BLOCK_COMMENT.3: /\/\*(?:[^*]|\*+[^*\/])*\*+\//
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
%ignore /[ \t\n\r\f]+/
"""

#: JavaCC's token kinds (the error messages list expected tokens in this order) and images
_KINDS: dict[str, tuple[int, str]] = {
    "$END": (0, "<EOF>"),
    "_NOT": (8, '"NOT"'), "_AND": (9, '"AND"'), "_OR": (10, '"OR"'), "_BETWEEN": (11, '"BETWEEN"'),
    "_IN": (12, '"IN"'), "TRUE": (13, '"TRUE"'), "FALSE": (14, '"FALSE"'), "NULL": (15, '"NULL"'),
    "_IS": (16, '"IS"'), "DECIMAL": (17, "<DECIMAL_LITERAL>"), "FLOAT": (18, "<FLOATING_POINT_LITERAL>"),
    "STRING": (20, "<STRING_LITERAL>"), "ID": (21, "<ID>"), "_EQ": (22, '"="'), "_NE": (23, '"<>"'),
    "_GT": (24, '">"'), "_GE": (25, '">="'), "_LT": (26, '"<"'), "_LE": (27, '"<="'), "_LPAR": (28, '"("'),
    "_COMMA": (29, '","'), "_RPAR": (30, '")"'), "_PLUS": (31, '"+"'), "_MINUS": (32, '"-"'),
}
#: where Java's parser decides with LOOKAHEAD(2): the tokens it reports instead
_AFTER_NOT = ["_BETWEEN", "_IN", "_GT", "_GE", "_LT", "_LE"]


def _string_value(image: str) -> str:
    return image[1:-1].replace("''", "'")


class _Build(Transformer):
    """The ``.jj``'s actions, run by the LALR parser at each reduction."""

    def start(self, c: list) -> Node:
        return nodes.as_boolean(c[0])

    def or_(self, c: list) -> Node:
        return nodes.create_logic("||", c[0], c[1])

    def and_(self, c: list) -> Node:
        return nodes.create_logic("&&", c[0], c[1])

    def eq(self, c: list) -> Node:
        return nodes.create_equal(c[0], c[1])

    def ne(self, c: list) -> Node:
        return nodes.create_not_equal(c[0], c[1])

    def is_null(self, c: list) -> Node:
        return nodes.create_is_null(c[0])

    def is_not_null(self, c: list) -> Node:
        return nodes.create_is_not_null(c[0])

    def gt(self, c: list) -> Node:
        return nodes.create_ordering(">", c[0], c[1])

    def ge(self, c: list) -> Node:
        return nodes.create_ordering(">=", c[0], c[1])

    def lt(self, c: list) -> Node:
        return nodes.create_ordering("<", c[0], c[1])

    def le(self, c: list) -> Node:
        return nodes.create_ordering("<=", c[0], c[1])

    def between(self, c: list) -> Node:
        return nodes.create_between(c[0], c[1], c[2])

    def not_between(self, c: list) -> Node:
        return nodes.create_not_between(c[0], c[1], c[2])

    def in_(self, c: list) -> Node:
        return nodes.create_in(c[0], c[1], False)

    def not_in(self, c: list) -> Node:
        return nodes.create_in(c[0], c[1], True)

    def strings(self, c: list) -> list[str]:
        return [_string_value(t) for t in c]

    def neg(self, c: list) -> Node:
        return nodes.create_negate(c[0])

    def not_(self, c: list) -> Node:
        return nodes.create_not(c[0])

    def string(self, c: list) -> Node:
        return Constant(_string_value(c[0]))

    def decimal(self, c: list) -> Node:
        """``ConstantExpression.createFromDecimal``: a Long, an Integer when it fits."""
        text = str(c[0]).rstrip("lL")
        value = int(text)
        if value > INT64_MAX:
            raise number_format(text)
        return Constant(value if INT32_MIN <= value <= INT32_MAX else JLong(value))

    def float_(self, c: list) -> Node:
        """``ConstantExpression.createFloat``: 0.0 and anything that rounds to 0 are refused
        (Java compares with ``Double.MIN_VALUE``, the smallest positive double)."""
        text = str(c[0])
        value = float(text)
        if value == float("inf"):
            raise runtime_error(f"{text} is greater than 1.7976931348623157E308")
        if value < 5e-324:
            raise runtime_error(f"{text} is less than 4.9E-324")
        return Constant(value)

    def true(self, c: list) -> Node:
        return _TRUE

    def false(self, c: list) -> Node:
        return _FALSE

    def null(self, c: list) -> Node:
        return _NULL

    def prop(self, c: list) -> Node:
        return Property(str(c[0]))


_TRUE = Constant(True, boolean=True)
_FALSE = Constant(False, boolean=True)
_NULL = Constant(None, boolean=True)

_PARSER = Lark(GRAMMAR, parser="lalr", lexer="basic", transformer=_Build(), maybe_placeholders=False)


# -- JavaCC's positions and messages ---------------------------------------------------------


class TokenMgrError(Exception):
    """``org.apache.rocketmq.filter.parser.TokenMgrError`` (its ``toString()``)."""

    java_class = "org.apache.rocketmq.filter.parser.TokenMgrError"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.java_class}: {message}")


def _positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of every character, as JavaCC's ``SimpleCharStream`` counts them
    (1-based; ``\\r``, ``\\n`` and ``\\r\\n`` end a line; a tab moves to the next multiple of 8)."""
    out = []
    line, column = 1, 0
    after_cr = after_lf = False
    for ch in text:
        column += 1
        if after_lf:
            after_lf = False
            line += 1
            column = 1
        elif after_cr:
            after_cr = False
            if ch == "\n":
                after_lf = True
            else:
                line += 1
                column = 1
        if ch == "\r":
            after_cr = True
        elif ch == "\n":
            after_lf = True
        elif ch == "\t":
            column -= 1
            column += 8 - (column % 8)
        out.append((line, column))
    return out


def _escape(s: str) -> str:
    """JavaCC's ``addEscapes``."""
    out = []
    for ch in s:
        if ch == "\0":
            continue
        special = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "'": "\\'",
                   "\\": "\\\\"}.get(ch)
        if special is not None:
            out.append(special)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append("\\u%04x" % ord(ch) if ord(ch) < 0x10000 else "".join(
                "\\u%04x" % u for u in divmod(ord(ch) - 0x10000, 0x400)))
        else:
            out.append(ch)
    return "".join(out)


def _lexical_error(text: str, start: int) -> TokenMgrError:
    """No token starts at ``start``: JavaCC's DFA reads on while some token could still
    match (``.`` before a digit, an open string or block comment), then reports the
    character it died on (or ``<EOF>`` when that was the last one) and what it had read."""
    pos = _positions(text)
    end = start + 1  # the DFA died on text[end - 1]
    if text[start] == "'" or text.startswith("/*", start):
        end = len(text) + 1  # alive to the end: an unterminated string or comment
    elif text[start] in "./" and start + 1 < len(text):
        end = start + 2
    if end > len(text):  # died at EOF
        line, column = pos[-1]
        image = text[start:]
        after = image if len(image) > 1 else ""
        return TokenMgrError(f"Lexical error at line {line}, column {column + 1}.  Encountered: <EOF> after : "
                             f'"{_escape(after)}"')
    ch = text[end - 1]
    if end == len(text):  # the last character: Java reads past it and sees EOF
        line, column = pos[end - 1]
        if ch in "\r\n":
            line, column = line + 1, 0
        image = text[start:end]
        after = image if len(image) > 1 else ""
        return TokenMgrError(f"Lexical error at line {line}, column {column + 1}.  Encountered: <EOF> after : "
                             f'"{_escape(after)}"')
    line, column = pos[end - 1]
    return TokenMgrError(f"Lexical error at line {line}, column {column}.  Encountered: "
                         f'"{_escape(ch)}" ({ord(ch)}), after : "{_escape(text[start:end - 1])}"')


def _parse_error(text: str, token: Token | None, expected: list[str]) -> ParseError:
    if token is None or token.type == "$END":
        line, column = _positions(text)[-1] if text else (0, 0)
        encountered = "<EOF>"
    else:
        line, column = _positions(text)[token.start_pos]
        encountered = f" {_KINDS[token.type][1]} \"{_escape(str(token))} \""
    names = sorted({t for t in expected if t in _KINDS and t != "_PLUS"}, key=lambda t: _KINDS[t][0])
    lines = "".join(f"{_KINDS[t][1]} ...\n    " for t in names)
    head = "Was expecting:" if len(names) == 1 else "Was expecting one of:"
    return ParseError(f'Encountered "{encountered}" at line {line}, column {column}.\n{head}\n    {lines}')


def parse(text: str) -> Node:
    """The expression's tree (a boolean node), or the error Java's parser raises:
    :class:`TokenMgrError`, :class:`~.nodes.ParseError` or a
    :class:`~trocket.codecs.sql92.java.JavaError` from a node's checks."""
    ip = _PARSER.parse_interactive(text)
    tokens = ip.lexer_thread.lex(ip.parser_state)
    previous: Token | None = None
    while True:
        try:
            token = next(tokens)
        except StopIteration:
            break
        except UnexpectedCharacters as exc:
            raise _lexical_error(text, exc.pos_in_stream) from None
        before = ip.copy(deepcopy_values=False)
        try:
            ip.feed_token(token)
        except UnexpectedToken:
            try:
                return before.feed_eof(token)  # Java stops at the first token that cannot continue
            except UnexpectedToken:
                pass
            expected = before.accepts()
            if previous is not None and previous.type == "_NOT" and expected <= {"_BETWEEN", "_IN"}:
                # Java's LOOKAHEAD(2) for NOT BETWEEN / NOT IN fails on the NOT itself
                raise _parse_error(text, previous, _AFTER_NOT) from None
            if previous is not None and previous.type == "_IS":
                expected = expected - {"NULL"}  # IS NULL is a LOOKAHEAD(2) alternative
            raise _parse_error(text, token, list(expected)) from None
        previous = token
    try:
        return ip.copy(deepcopy_values=False).feed_eof(previous)
    except UnexpectedToken:
        expected = ip.accepts()
        if previous is not None and previous.type == "_NOT" and expected <= {"_BETWEEN", "_IN"}:
            raise _parse_error(text, previous, _AFTER_NOT) from None
        if previous is not None and previous.type == "_IS":
            expected = expected - {"NULL"}
        raise _parse_error(text, None, list(expected)) from None
