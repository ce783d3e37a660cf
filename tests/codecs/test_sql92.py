"""codecs/sql92: RocketMQ 4.9.8's SQL92 selectors, parsed and evaluated as Java does.

The remarks below are what the Java 4.9.8 broker answered to CHECK_CLIENT_CONFIG for
the same expressions (tests/acceptance/java/test_sql92_differential.py compares the
two brokers live over a larger table); the evaluation cases follow Java's
``ComparisonExpression`` / ``LogicExpression`` / ``UnaryExpression`` rules.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trocket.codecs.sql92 import FilterCompileError, compile_filter
from trocket.codecs.sql92.codegen import FEW_NAMES
from trocket.codecs.sql92.java import JavaError, JLong, java_compare, java_double_str, parse_double, parse_int

EXPECTING_OPERAND = (
    '\nWas expecting one of:\n    "NOT" ...\n    "TRUE" ...\n    "FALSE" ...\n    "NULL" ...\n'
    "    <DECIMAL_LITERAL> ...\n    <FLOATING_POINT_LITERAL> ...\n    <STRING_LITERAL> ...\n    <ID> ...\n"
    '    "(" ...\n    "-" ...\n    '
)
PE = "org.apache.rocketmq.filter.parser.ParseException: "
TME = "org.apache.rocketmq.filter.parser.TokenMgrError: "
RTE = "java.lang.RuntimeException: "

#: (expression, the Java broker's remark)
REFUSED = [
    ("a >", PE + 'Encountered "<EOF>" at line 1, column 3.' + EXPECTING_OPERAND),
    ("", PE + 'Encountered "<EOF>" at line 0, column 0.' + EXPECTING_OPERAND),
    ("a # 5", TME + 'Lexical error at line 1, column 3.  Encountered: "#" (35), after : ""'),
    ("a > 5 #", TME + 'Lexical error at line 1, column 8.  Encountered: <EOF> after : ""'),
    ("'abc", TME + "Lexical error at line 1, column 5.  Encountered: <EOF> after : \"\\'abc\""),
    ("a.b = 1", TME + 'Lexical error at line 1, column 3.  Encountered: "b" (98), after : "."'),
    ("/x y", TME + 'Lexical error at line 1, column 2.  Encountered: "x" (120), after : "/"'),
    ("a = NULL", RTE + "'NULL' cannot be compared."),
    ("a > 'x'", RTE + "Value ''x'' cannot be compared."),
    ("TRUE = 5", RTE + "'TRUE' cannot be compared with '5'"),
    ("5", PE + "Expression will not result in a boolean value: 5"),
    ("''", PE + "Expression will not result in a boolean value: ''"),
    ("5 IN ('x')", RTE + "Expected a property for In expression, got: 5"),
    ("a IN ('x') IN ('y')", RTE + "Expected a property for In expression, got: a IN ( x )"),
    ("a BETWEEN 1 AND 'x'", RTE + 'java.lang.NumberFormatException: For input string: "x"'),
    ("a BETWEEN 5 AND 1", RTE + "Illegal values of between, left value(5) must less than or equal to right value(1)"),
    ("a BETWEEN TRUE AND 'x'",
     RTE + "Illegal values of between, left value(true) must less than or equal to right value(x)"),
    ("a > 0.0", RTE + "0.0 is less than 4.9E-324"),
    ("a > 1E400", RTE + "1E400 is greater than 1.7976931348623157E308"),
    ("a = 9223372036854775808", 'java.lang.NumberFormatException: For input string: "9223372036854775808"'),
    ("(a > 1) > 2", RTE + "Value '(a > 1)' cannot be compared."),
    ("NOT a > 5", RTE + "Value '(NOT a)' cannot be compared."),
    ("a = 12345678.9 OR b >= TRUE", RTE + "Value 'TRUE' cannot be compared."),
    ("a IS NOT 5", PE + 'Encountered " <DECIMAL_LITERAL> "5 "" at line 1, column 10.\nWas expecting:\n    "NULL" ...\n    '),
    ("a IS b", PE + 'Encountered " <ID> "b "" at line 1, column 6.\nWas expecting:\n    "NOT" ...\n    '),
    ("a IN ()", PE + 'Encountered " ")" ") "" at line 1, column 7.\nWas expecting:\n    <STRING_LITERAL> ...\n    '),
    ("a NOT b", PE + 'Encountered " "NOT" "NOT "" at line 1, column 3.\nWas expecting one of:\n    "BETWEEN" ...\n'
     '    "IN" ...\n    ">" ...\n    ">=" ...\n    "<" ...\n    "<=" ...\n    '),
    ("(a", PE + 'Encountered "<EOF>" at line 1, column 2.\nWas expecting one of:\n    "NOT" ...\n    "AND" ...\n'
     '    "OR" ...\n    "BETWEEN" ...\n    "IN" ...\n    "IS" ...\n    "=" ...\n    "<>" ...\n    ">" ...\n'
     '    ">=" ...\n    "<" ...\n    "<=" ...\n    ")" ...\n    '),
    ("a NOT BETWEEN 1", PE + 'Encountered "<EOF>" at line 1, column 15.\nWas expecting:\n    "AND" ...\n    '),
]


@pytest.mark.parametrize("expression,remark", REFUSED)
def test_refused_with_javas_remark(expression, remark):
    with pytest.raises(FilterCompileError) as info:
        compile_filter(expression)
    assert info.value.remark == remark


@pytest.mark.parametrize("expression", [
    "a > 5 b", "a )", "a > 5 -- to the end", "a > 5 /* block */", "x > 5L", "a >= .5", "x > 5.", "a <> 1 <> 2",
    "a = 0.5E1 + 1", "nOt a iS NuLl", "$x_1 = 'y'", "NULL", "TRUE", "a", "a = 'it''s' AND b",
])
def test_accepted_as_java_accepts(expression):
    compile_filter(expression)


def test_javacc_positions_count_lines_and_tabs():
    with pytest.raises(FilterCompileError) as info:
        compile_filter("a = 1 AND\n\tb >")
    assert 'at line 2, column 11.' in info.value.remark  # the tab takes columns 1-8
    with pytest.raises(FilterCompileError) as info:
        compile_filter("a\r\n  # 1")
    assert "Lexical error at line 2, column 3." in info.value.remark


def props(**kw: str) -> dict[str, str]:
    return kw


#: (expression, properties, Java's raw result: True / False / None (unknown) / "error")
CASES = [
    ("a > 5", props(a="6"), True),
    ("a > 5", props(a="5"), False),
    ("a > 5", props(), None),
    ("a > 5", props(a="6.5"), "error"),  # Integer.valueOf("6.5")
    ("a > 5", props(a=" 6"), "error"),
    ("a > 5.0", props(a=" 6"), True),  # Double.valueOf trims
    ("a > 5.0", props(a="6d"), True),
    ("a > 5.0", props(a="NaN"), True),  # Double.compare: NaN above everything
    ("a = 6", props(a="06"), True),
    ("a = 6", props(a="+6"), True),
    ("a = 6", props(a="\u0666"), True),  # Character.digit takes any Unicode digit
    ("a = 6.0", props(a="\u0666"), "error"),
    ("a = 2147483648", props(a="2147483648"), True),
    ("a = 6", props(a="2147483648"), "error"),
    ("a = 'abc'", props(a="abc"), True),
    ("a = 6", props(a="abc"), "error"),
    ("a <> 6", props(), None),
    ("a = b", props(), True),  # both null: equal
    ("a = b", props(a="x"), False),
    ("a IS NULL", props(), True),
    ("a IS NOT NULL", props(), False),
    ("a > b", props(a="10", b="9"), True),  # two strings: as doubles
    ("a > b", props(a="x", b="9"), "error"),
    ("a IN ('x', 'y')", props(a="y"), True),
    ("a NOT IN ('x', 'y')", props(), None),
    ("a BETWEEN 1 AND 3", props(a="3"), True),
    ("a NOT BETWEEN 1 AND 3", props(a="4"), True),
    ("b = TRUE", props(b="TRUE"), True),
    ("b = TRUE", props(b="yes"), False),
    ("b", props(b="true"), False),  # a property is a String, never a Boolean
    ("NOT b", props(b="true"), True),
    ("5 = TRUE", props(), False),
    ("a > 5 OR TRUE", props(a="x"), "error"),  # the error goes through the OR
    ("TRUE OR a > 5", props(a="x"), True),  # ... unless short-circuited
    ("a > 5 OR b = 'y'", props(b="y"), True),
    ("a > 5 OR b = 'y'", props(b="n"), None),
    ("a > 5 AND b = 'y'", props(b="n"), False),
    ("-a > -10", props(a="5"), None),  # negating a String: unknown
    ("a = -5", props(a="-5"), True),
    ("TAGS = 'TagA'", {"TAGS": "TagA"}, True),
]


@pytest.mark.parametrize("expression,properties,expected", CASES)
def test_evaluation(expression, properties, expected):
    f = compile_filter(expression)
    if expected == "error":
        with pytest.raises(JavaError):
            f.evaluate(properties)
        assert f.matches(properties) is False
    else:
        assert f.evaluate(properties) is expected
        assert f.matches(properties) is (expected is True)


def test_tostring_as_java():
    assert str(compile_filter("a BETWEEN 1 AND 2.5")) == "((a >= 1) && (a <= 2.5))"
    assert str(compile_filter("a <> 'x' OR b IS NOT NULL")) == "((NOT (a == 'x')) || (NOT (b == NULL)))"
    assert str(compile_filter("a NOT IN ('x','y')")) == "a NOT IN ( x, y )"


def test_java_conversions():
    assert parse_int("+12") == 12 and type(parse_long_ := JLong(5)) is JLong and parse_long_ == 5
    for bad in ("", "+", " 1", "1_0", "1.0", "2147483648"):
        with pytest.raises(JavaError):
            parse_int(bad)
    assert parse_double(" 1.5f ") == 1.5 and math.isinf(parse_double("-Infinity"))
    assert parse_double("0x1.8p1") == 3.0
    for bad in ("inf", "nan", "1_0", "", "1e"):
        with pytest.raises(JavaError):
            parse_double(bad)
    assert java_compare(0.0, -0.0) == 1 and java_compare(math.nan, math.inf) == 1
    assert java_compare(5, JLong(5)) == 0 and java_compare("5", JLong(5)) == 0
    assert [java_double_str(x) for x in (1.0, 1e7, 1.5e-5, 123.25, 0.001, -2e-3)] == [
        "1.0", "1.0E7", "1.5E-5", "123.25", "0.001", "-0.002"]


@given(st.text(max_size=30))
def test_any_text_compiles_or_is_refused_cleanly(text):
    try:
        f = compile_filter(text)
    except FilterCompileError as exc:
        assert exc.remark.startswith(("org.apache.rocketmq.filter.parser.", "java.lang."))
    else:
        f.matches({"a": "1", "b": "x"})


@given(st.integers(min_value=-(1 << 40), max_value=1 << 40), st.integers(min_value=-1000, max_value=1000))
def test_integer_comparisons_agree_with_python(value, const):
    for op, py in ((">", value > const), ("<=", value <= const), ("=", value == const)):
        f = compile_filter(f"a {op} {const}")
        if -(1 << 31) <= value < (1 << 31):
            assert f.evaluate({"a": str(value)}) is py
        else:  # Integer.valueOf refuses it: no match
            assert f.matches({"a": str(value)}) is False


# -- the generated evaluator (the broker's) agrees with the closures ---------------------------

_VALUES = ["5", "6", "-5", "6.5", " 6", "abc", "true", "TRUE", "NaN", "2147483648", "06", "+7", "1e3", "x", "\u0663"]
_OPERANDS = ["a", "b", "c", "5", "6.5", "-5", "'6'", "'x'", "TRUE", "2147483648", "-a"]


@st.composite
def _expressions(draw, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "null", "between", "prop"] + (["and", "or", "not"] if depth < 3 else [])))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "<>", ">", ">=", "<", "<="]))
        return f"{draw(st.sampled_from(_OPERANDS))} {op} {draw(st.sampled_from(_OPERANDS))}"
    if kind == "in":
        return f"{draw(st.sampled_from('abc'))} {draw(st.sampled_from(['IN', 'NOT IN']))} ('6', 'x', 'true')"
    if kind == "null":
        return f"{draw(st.sampled_from('abc'))} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "between":
        bounds = draw(st.sampled_from(["1 AND 6.5", "1 AND 6", "-1 AND 2147483648"]))
        return f"{draw(st.sampled_from('abc'))} {draw(st.sampled_from(['', 'NOT ']))}BETWEEN {bounds}"
    if kind == "prop":
        return draw(st.sampled_from("abc"))
    if kind == "not":
        return f"NOT ({draw(_expressions(depth + 1))})"
    op = "AND" if kind == "and" else "OR"
    return f"({draw(_expressions(depth + 1))}) {op} ({draw(_expressions(depth + 1))})"


def _outcome(fn, arg):
    try:
        return fn(arg)
    except JavaError:
        return "error"


@given(_expressions(), st.dictionaries(st.sampled_from("abcd"), st.sampled_from(_VALUES), max_size=4))
def test_generated_evaluator_agrees_with_the_closures(expression, properties):
    try:
        f = compile_filter(expression)
    except FilterCompileError:
        return
    text = "".join(f"{k}\x01{v}\x02" for k, v in properties.items())
    assert _outcome(f.evaluate_text, text) == _outcome(f.evaluate, properties), f.source


def test_generated_evaluator_decodes_everything_for_many_names():
    names = [f"p{i}" for i in range(FEW_NAMES + 1)]
    f = compile_filter(" AND ".join(f"{n} = {i}" for i, n in enumerate(names)))
    assert "_decode(text)" in f.source
    assert f.evaluate_text("\x02".join(f"{n}\x01{i}" for i, n in enumerate(names))) is True
    assert "_get(text, 'a')" in compile_filter("a = 1").source


def test_generated_evaluator_looks_up_only_what_it_reads():
    """Few names: each looked up where first read, so a false left side of AND skips the rest."""
    f = compile_filter("a BETWEEN 0 AND 10 AND b <> 'z' AND c IS NOT NULL")
    assert "_decode" not in f.source
    assert f.source.count("_get(text, 'a')") == 1
    assert f.evaluate_text("a\x015\x02b\x01y\x02c\x01w") is True
    assert f.evaluate_text("a\x0111\x02b\x01y\x02c\x01w") is False
    assert f.evaluate_text("a\x015\x02b\x01z\x02c\x01w") is False
    assert f.evaluate_text("a\x015\x02b\x01y") is False
    assert f.evaluate_text("b\x01y\x02c\x01w") is None
