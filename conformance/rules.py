"""Replay's comparison rules: which response fields legitimately change between a
captured session and its replay, per request code, and the comparison itself.

A replayed response is compared with the captured one field by field: ``code``,
``remark``, every ext field and the body. These differences are expected and ignored
(the table, also in README.md "Capturing and replay"):

* SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320): ext ``msgId``
  (it holds the store host and the commit-log offset), ``queueOffset`` (state),
  ``transactionId``. CONSUMER_SEND_MSG_BACK (36): ext ``msgId``, ``queueOffset``.
* PULL_MESSAGE (11): ext ``nextBeginOffset``, ``minOffset``, ``maxOffset``; the body is
  compared message by message (topic, queue id, flag, sys flag, body, born timestamp,
  reconsume times, properties but ``MIN_OFFSET``/``MAX_OFFSET``), leaving out the queue
  and commit-log offsets, the store timestamp and the store and born hosts; and the two
  properties a broker adds or drops as it stores a message, which depend on the broker
  and not the session: ``CLUSTER`` (its cluster name) and ``WAIT`` (dropped by 4.9.1+
  brokers, trocket's since issue 28; kept by older ones).
* QUERY_CONSUMER_OFFSET (14), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30),
  GET_MIN_OFFSET (31): ext ``offset``. GET_EARLIEST_MSG_STORETIME (32): ext ``timestamp``.
* GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106): the ``brokerAddrs``
  values (the address the target advertises, or a capture proxy's). 105 is also
  re-asked for up to 10 s while its answer differs (:attr:`Rule.settle`): a broker
  registers an auto-created topic with its name server asynchronously, after the
  send that created it; the capture shows that registration, a replay cannot wait on
  it.
* GET_CONSUMER_LIST_BY_GROUP (38): the order of ``consumerIdList``.
* GET_BROKER_RUNTIME_INFO (28), GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43),
  GET_ALL_DELAY_OFFSET (45): the body (run-time figures and whole-broker state).

Not replayed (``SKIPPED_CODES``; counted as skipped): REGISTER_BROKER (103) and
UNREGISTER_BROKER (104), a captured broker's own registration with its name server:
replaying them would point the target's routes at the captured broker.

Anything else that differs is an unexpected difference. Rewrites (``--rewrite
topic=OLD:NEW``, ``group=OLD:NEW``) apply to the requests sent and, for the
comparison, to the captured responses, so a session replayed under new names still
compares clean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CodecError

__all__ = ["SKIPPED_CODES", "Rule", "RULES", "DEFAULT_RULE", "Difference", "Rewriter", "rule_for", "compare_responses"]


#: stored properties a replay does not compare: the client's pull adds the first two;
#: the broker adds CLUSTER and (4.9.1+) drops WAIT as it stores a message
_BROKER_DEPENDENT_PROPERTIES = ("MIN_OFFSET", "MAX_OFFSET", "CLUSTER", "WAIT")


def _msgs_key(body: bytes) -> Any:
    """A pull body's messages without their state-dependent fields."""
    from trocket.codecs.message.record import decode_records

    out = []
    for m in decode_records(body):
        props = dict(m.properties or {}) if not isinstance(m.properties, str) else m.properties
        if isinstance(props, dict):
            for key in _BROKER_DEPENDENT_PROPERTIES:
                props.pop(key, None)
        out.append(
            {
                "topic": m.topic,
                "queue_id": m.queue_id,
                "flag": m.flag,
                "sys_flag": m.sys_flag,
                "born_timestamp": m.born_timestamp,
                "reconsume_times": m.reconsume_times,
                "body": bytes(m.body).hex() if m.body is not None else None,
                "properties": props,
            }
        )
    return out


def _json(body: bytes) -> Any:
    from trocket.codecs.bodies.fastjson import loads

    return loads(body)


def _blank_broker_addrs(doc: Any) -> Any:
    """Replace every ``brokerAddrs`` map's values by ``"*"`` (anywhere in the document)."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            if k == "brokerAddrs" and isinstance(v, dict):
                out[k] = {kk: "*" for kk in v}
            else:
                out[k] = _blank_broker_addrs(v)
        return out
    if isinstance(doc, list):
        return [_blank_broker_addrs(v) for v in doc]
    return doc


def _route_key(body: bytes) -> Any:
    return _blank_broker_addrs(_json(body))


def _consumer_ids_key(body: bytes) -> Any:
    doc = _json(body)
    if isinstance(doc, dict) and isinstance(doc.get("consumerIdList"), list):
        doc = dict(doc, consumerIdList=sorted(map(str, doc["consumerIdList"])))
    return doc


@attrs.frozen(slots=True)
class Rule:
    """How to compare one request code's responses.

    ``body``: ``"exact"`` (bytes), ``"ignore"``, or a function turning a body into
    the value compared (a decode that drops the fields that may change).
    """

    name: str
    ignore_ext: frozenset[str] = frozenset()
    ignore_remark: bool = False
    body: str | Callable[[bytes], Any] = "exact"
    #: seconds to keep re-sending the request while its answer differs (state the
    #: target reaches asynchronously); 0 = compare the first answer
    settle: float = 0.0


_SEND = Rule("send", ignore_ext=frozenset({"msgId", "queueOffset", "transactionId"}))
DEFAULT_RULE = Rule("exact")

RULES: dict[int, Rule] = {
    10: _SEND,
    310: _SEND,
    320: _SEND,
    36: Rule("send back", ignore_ext=frozenset({"msgId", "queueOffset"})),
    11: Rule("pull", ignore_ext=frozenset({"nextBeginOffset", "minOffset", "maxOffset"}), body=_msgs_key),
    14: Rule("offset state", ignore_ext=frozenset({"offset"})),
    29: Rule("offset state", ignore_ext=frozenset({"offset"})),
    30: Rule("offset state", ignore_ext=frozenset({"offset"})),
    31: Rule("offset state", ignore_ext=frozenset({"offset"})),
    32: Rule("store time", ignore_ext=frozenset({"timestamp"})),
    105: Rule("route", body=_route_key, settle=10.0),
    106: Rule("cluster", body=_route_key),
    38: Rule("consumer ids", body=_consumer_ids_key),
    28: Rule("runtime", body="ignore"),
    21: Rule("state body", body="ignore"),
    43: Rule("state body", body="ignore"),
    45: Rule("state body", body="ignore"),
}


#: request codes a replay leaves out (see the module docstring)
SKIPPED_CODES = frozenset({103, 104})


def rule_for(code: int) -> Rule:
    return RULES.get(code, DEFAULT_RULE)


@attrs.frozen(slots=True)
class Difference:
    field: str  # "code", "remark", "ext.KEY", "body"
    expected: Any
    got: Any

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected!r}, got {self.got!r}"


# -- rewrites ------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Rewriter:
    """``topic=OLD:NEW`` and ``group=OLD:NEW`` substitutions on whole names: ext values,
    JSON strings in JSON bodies, whole words in remarks, and (for topics) the topic of
    pulled messages."""

    topics: dict[str, str] = attrs.field(factory=dict)
    groups: dict[str, str] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, specs: Iterable[str]) -> Rewriter:
        topics: dict[str, str] = {}
        groups: dict[str, str] = {}
        for spec in specs:
            kind, sep, rest = spec.partition("=")
            old, sep2, new = rest.partition(":")
            if not sep or not sep2 or not old or not new or kind not in ("topic", "group"):
                raise ValueError(f"bad rewrite {spec!r}: expected topic=OLD:NEW or group=OLD:NEW")
            (topics if kind == "topic" else groups)[old] = new
        return cls(topics, groups)

    def __bool__(self) -> bool:
        return bool(self.topics or self.groups)

    @property
    def names(self) -> dict[str, str]:
        names = dict(self.topics)
        names.update(self.groups)
        for old, new in self.groups.items():
            names[f"%RETRY%{old}"] = f"%RETRY%{new}"
            names[f"%DLQ%{old}"] = f"%DLQ%{new}"
        return names

    def command(self, cmd: RemotingCommand) -> RemotingCommand:
        """``cmd`` with the names rewritten (a new object; ``cmd`` is left alone)."""
        if not self:
            return cmd
        names = self.names
        ext = cmd.ext_fields
        if ext:
            ext = {k: names.get(v, v) for k, v in ext.items()}
        body = cmd.body
        if body[:1] in (b"{", b"["):
            for old, new in names.items():
                body = body.replace(json.dumps(old).encode(), json.dumps(new).encode())
        remark = cmd.remark
        if remark:
            for old, new in names.items():
                remark = re.sub(rf"(?<![\w%|-]){re.escape(old)}(?![\w%|-])", new.replace("\\", "\\\\"), remark)
        return attrs.evolve(cmd, ext_fields=ext, body=body, remark=remark)

    def pulled(self, key: Any) -> Any:
        """A pull body's comparison key with its messages' topics rewritten."""
        if not self.topics or not isinstance(key, list):
            return key
        return [dict(m, topic=self.topics.get(m["topic"], m["topic"])) for m in key]


# -- the comparison -------------------------------------------------------------------------


def _body_key(rule: Rule, body: bytes) -> Any:
    if not callable(rule.body):
        return body
    try:
        return rule.body(body)
    except (CodecError, ValueError, TypeError, KeyError) as exc:
        return ("undecodable body", body[:64].hex(), str(exc))


def compare_responses(
    request_code: int, expected: RemotingCommand, got: RemotingCommand, rewriter: Rewriter | None = None
) -> list[Difference]:
    """The unexpected differences between a captured and a replayed response."""
    rule = rule_for(request_code)
    if rewriter:
        expected = rewriter.command(expected)
    diffs: list[Difference] = []
    if expected.code != got.code:
        diffs.append(Difference("code", expected.code, got.code))
    if not rule.ignore_remark and (expected.remark or None) != (got.remark or None):
        diffs.append(Difference("remark", expected.remark, got.remark))
    e_ext = expected.ext_fields or {}
    g_ext = got.ext_fields or {}
    for key in sorted(set(e_ext) | set(g_ext)):
        if key in rule.ignore_ext:
            continue
        if e_ext.get(key) != g_ext.get(key):
            diffs.append(Difference(f"ext.{key}", e_ext.get(key), g_ext.get(key)))
    if rule.body != "ignore" and (expected.body or got.body):
        if rule.body == "exact":
            if expected.body != got.body:
                diffs.append(Difference("body", _show(expected.body), _show(got.body)))
        else:
            e_key, g_key = _body_key(rule, expected.body), _body_key(rule, got.body)
            if rewriter and rule is RULES[11]:
                e_key = rewriter.pulled(e_key)
            if e_key != g_key:
                diffs.append(Difference("body", e_key, g_key))
    return diffs


def _show(body: bytes, limit: int = 512) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = "0x" + body[:limit].hex()
        return text + ("..." if len(body) > limit else "")
    return text[:limit] + ("..." if len(text) > limit else "")
