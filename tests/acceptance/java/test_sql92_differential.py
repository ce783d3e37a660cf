"""SQL92 filters, trocket broker vs the Java 4.9.8 broker (issue 25), over raw frames.

Both brokers get the same messages (one queue, a property table with the awkward
values: blanks, ``6.5``, ``NaN``, a number past ``Integer.MAX_VALUE``, non-ASCII digits,
booleans, tags, keys) and the same expressions, pulled with the subscription in the
pull (sysFlag 4, expressionType SQL92) until the queue's end: the sets of messages each
expression delivers must be equal. Expressions Java refuses are checked with
CHECK_CLIENT_CONFIG (46): the same code (SUBSCRIPTION_PARSE_FAILED) and the same
remark, JavaCC's message texts included. Both brokers run with
``enablePropertyFilter=true`` (conftest's broker.conf for each).

One difference is deliberate and asserted as such: a pull carrying an expression that
does not compile is refused by trocket (SUBSCRIPTION_PARSE_FAILED), where Java 4.9.8
delivers the queue unfiltered (its ``ConsumerFilterManager.build`` returns null, and
the ``assert`` after it is off in production).
"""

from __future__ import annotations

import json
import time

import pytest

from acc_tools import RawClient, decode_records
from java_tools import on_both, wait_for

pytestmark = pytest.mark.usefixtures("java_bundle")

#: the messages: their properties (each also gets ``i``, its index)
MESSAGES: list[dict[str, str]] = [
    {},
    {"a": "6"},
    {"a": "5"},
    {"a": "-5"},
    {"a": "6.5"},
    {"a": " 6"},
    {"a": "abc"},
    {"a": "1e3"},
    {"a": "2147483648"},
    {"a": "NaN"},
    {"a": "Infinity"},
    {"a": "true", "b": "true"},
    {"a": "TRUE", "b": "false"},
    {"a": "06"},
    {"a": "+7"},
    {"a": "6d"},
    {"a": "x", "b": "x"},
    {"a": "it's"},
    {"TAGS": "TagA", "a": "1"},
    {"TAGS": "TagB", "KEYS": "k1 k2"},
    {"a": "\u0663"},  # ARABIC-INDIC DIGIT THREE: Integer.valueOf takes it, Double.valueOf does not
    {"a": "0x10"},
    {"a": "1.0", "c": "Hello"},
    {"a": "-0.0"},
    {"a": "0.0", "b": "6"},
    {"a": "1000", "c": "hello"},
]

#: expressions both brokers accept: the delivered sets must be equal
EXPRESSIONS: list[str] = [
    "a > 5", "a >= 5", "a < 5", "a <= 5", "a = 6", "a <> 6", "a = 6.0", "a > 5.5", "a >= 6.5",
    "a = '6'", "a <> '6'", "a = 'abc'", "a IS NULL", "a IS NOT NULL", "a BETWEEN 5 AND 7",
    "a NOT BETWEEN 5 AND 7", "a BETWEEN 5.0 AND 7.0", "a IN ('6', 'abc', 'it''s')", "a NOT IN ('6', 'abc')",
    "NOT (a > 5)", "NOT a", "NOT a OR a = 5", "a > 5 OR b = 'true'", "a > 5 AND b IS NULL", "b = TRUE",
    "b = FALSE", "b <> TRUE", "b", "NOT b", "TRUE", "FALSE", "NULL", "a = b", "a <> b", "a > b", "a < b",
    "TAGS = 'TagA'", "TAGS IN ('TagA', 'TagB')", "TAGS IS NOT NULL AND a = 1", "KEYS = 'k1 k2'",
    "-a > -10", "a > -6", "a = 2147483648", "a > 2147483647", "a = 1000", "a > 1E2", "a >= .5",
    "c = 'Hello'", "a = 'it''s'", "a > 5 OR TRUE", "TRUE OR a > 5", "a > 5 AND FALSE", "FALSE AND a > 5",
    "a > 5 -- a comment", "a > 5 b", "a IN ('x') OR a = 6", "a < 10 AND a > -10", "UNIQ_KEY IS NOT NULL",
    "i = 3", "i BETWEEN 10 AND 12", "a = 6L", "a > 5 AND a < 7", "(a > 5 OR a < 0) AND NOT (a = 6)",
    "a = TRUE", "a <> FALSE", "5 < a", "6 = a", "'6' = a", "a = 1 OR a = 1.0", "a = 0.5E1 + 1",
    "a IS NULL OR a > 5", "NOT (a IS NULL)", "a > 5 IS NULL", "(a > 5) = FALSE", "(a > 5) = (b = 'true')",
    "i >= 0 AND i < 100", "a = 3", "a = -5.0", "-a = 5", "a > -1 AND a < 1", "c IN ('Hello', 'hello')", "c = 'hello'",
]

#: expressions Java refuses: same code and remark at CHECK_CLIENT_CONFIG. (None with a
#: control character: fastjson's CheckClientRequestBody decoding of an escaped ``\n`` or
#: ``\t`` hands the parser a string that starts with a quote.)
INVALID: list[str] = [
    "", "a >", "a # 5", "a = NULL", "a > 'x'", "TRUE = 5", "5", "NOT 5", "5 IN ('x')", "a BETWEEN 1 AND 'x'",
    "a BETWEEN 5 AND 1", "a BETWEEN TRUE AND 'x'", "a > 0.0", "a > 1E400", "a = 9223372036854775808",
    "(a > 1) > 2", "a BETWEEN 1 AND 2 AND", "a IS NOT 5", "a IN ()", "a = 1.5E-5 AND b > 'q'",
    "a = 12345678.9 OR b >= TRUE", "(a", "''", "a.b = 1", "a > 5 #", "'abc", "/x", "/* abc", "a NOT b",
    "a IS b", "NOT a > 5", "a > 5 AND", "a BETWEEN -1 AND 'x'", "a > +'x'", "a IN ('x') IN ('y')",
    "0x > 1", "a NOT IN ('x'", "a NOT BETWEEN 1", "a = -", "a . 5", "a > .", "/x y", "a > 5 /", "a > 5 ! x",
    "a > 'x", "a > 5 !", "a = 1 AND .x", "a >= TRUE", "a IN (1)", "a = 'x' = NULL",
]


def _props(i: int, extra: dict[str, str]) -> str:
    props = {"i": str(i), "WAIT": "true", **extra}
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def _send(c: RawClient, topic: str, i: int, extra: dict[str, str]) -> None:
    resp, _ = c.call(10, {
        "producerGroup": "sqlDiffP", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
        "properties": _props(i, extra), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
    }, f"m{i}".encode())
    assert resp["code"] == 0, resp


def _pull_matching(c: RawClient, topic: str, expression: str, end: int) -> tuple[int, set[int] | str]:
    """(code of the first answer that is not a plain pull answer, or 0; the indexes
    delivered) pulling the queue from 0 to ``end``."""
    got: set[int] = set()
    offset = 0
    while offset < end:
        resp, body = c.call(11, {
            "consumerGroup": "sqlDiffG", "topic": topic, "queueId": "0", "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": expression, "subVersion": "0", "expressionType": "SQL92",
        })
        code = resp["code"]
        if code not in (0, 19, 20):
            return code, resp.get("remark") or ""
        if code == 0:
            got.update(int(r["props"]["i"]) for r in decode_records(body))
        offset = int(resp["extFields"]["nextBeginOffset"])
        if code == 19:
            break
    return 0, got


def _check_client_config(c: RawClient, expression: str) -> tuple[int, str | None]:
    body = json.dumps({"clientId": "sqlDiff", "group": "sqlDiffG", "subscriptionData": {
        "topic": "T", "subString": expression, "expressionType": "SQL92", "classFilterMode": False,
        "subVersion": 1, "tagsSet": [], "codeSet": []}}).encode()
    resp, _ = c.call(46, {}, body)
    return resp["code"], resp.get("remark")


@pytest.fixture(scope="module")
def loaded(request):
    """Both brokers with the messages in one queue of a fresh topic: {kind: (peer, topic)}."""
    out = {}
    topic = f"sqlDiff{int(time.time()) % 100000}"
    for kind in ("trocket", "java"):
        peer = request.getfixturevalue(f"{kind}_peer")
        with RawClient(peer.hostport) as c:
            c.create_topic(topic, queues=1)
            for i, extra in enumerate(MESSAGES):
                _send(c, topic, i, extra)
            # the consume queue is built after the put's answer: wait for it
            assert wait_for(lambda: c.max_offset(topic, 0) == len(MESSAGES), 15, 0.05), c.max_offset(topic, 0)
        out[kind] = (peer, topic)
    return out


def test_sql92_delivers_what_java_delivers(loaded):
    results: dict[str, dict[str, object]] = {}
    for kind, (peer, topic) in loaded.items():
        with RawClient(peer.hostport) as c:
            results[kind] = {e: _pull_matching(c, topic, e, len(MESSAGES)) for e in EXPRESSIONS}
    java, ours = results["java"], results["trocket"]
    with RawClient(loaded["java"][0].hostport) as c:
        refused = {e: a for e in EXPRESSIONS if (a := _check_client_config(c, e))[0] != 0}
    assert not refused, f"the table's expressions must all be valid for Java: {refused}"
    diffs = {e: {"java": sorted(java[e][1]), "trocket": sorted(ours[e][1]) if ours[e][0] == 0 else ours[e]}
             for e in EXPRESSIONS if ours[e] != java[e]}
    assert not diffs, json.dumps(diffs, indent=1, ensure_ascii=False)
    # the table is not vacuous: most expressions select some but not all messages
    partial = [e for e in EXPRESSIONS if 0 < len(java[e][1]) < len(MESSAGES)]  # type: ignore[arg-type]
    assert len(partial) > len(EXPRESSIONS) * 2 // 3, partial


def test_sql92_refusals_match_java(java_peer, trocket_peer):
    answers = {}
    for peer in (java_peer, trocket_peer):
        with RawClient(peer.hostport) as c:
            answers[peer.kind] = [_check_client_config(c, e) for e in INVALID]
    diffs = [(e, j, t) for e, j, t in zip(INVALID, answers["java"], answers["trocket"]) if j != t]
    assert not diffs, "\n".join(f"{e!r}:\n  java:    {j}\n  trocket: {t}" for e, j, t in diffs)
    assert all(code == 23 for code, _ in answers["java"]), answers["java"]


@on_both()
def test_sql92_pull_with_a_bad_expression(peer, loaded):
    """The deliberate difference: Java delivers everything, trocket refuses."""
    _, topic = loaded[peer.kind]
    with RawClient(peer.hostport) as c:
        code, got = _pull_matching(c, topic, "a = NULL", len(MESSAGES))
    if peer.kind == "java":
        assert (code, got) == (0, set(range(len(MESSAGES))))
    else:
        assert (code, got) == (23, "parse the consumer's subscription failed")
