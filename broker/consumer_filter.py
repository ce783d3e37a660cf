"""SQL92 subscriptions on the broker: RocketMQ 4.9.8's ``ConsumerFilterManager`` and
``ExpressionMessageFilter`` / ``ExpressionForRetryMessageFilter``.

A consumer group's SQL92 expression comes with its heartbeats (or, for a pull that
carries its subscription, with the pull) and is compiled once per (group, topic,
expression) by :mod:`trocket.codecs.sql92`; the compiled filter (or the compile error)
is cached, so a pull only evaluates. The heartbeat compiles ahead
(:meth:`ConsumerFilters.register`), so the first pull does not pay for it and a bad
expression is logged when it arrives.

A pull's filter tests each stored record on its properties: the whole properties
string decoded, user and system properties alike (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ...,
as Java's ``MessageDecoder.decodeProperties``). On a group's retry topic,
with ``filterSupportRetry``, a record is tested with the group's expression for the topic
it first came from (its ``RETRY_TOPIC`` property); with no such expression it passes.

Java also keeps a bloom filter per consumer to skip consume-queue entries early
(``enableCalcFilterBitMap``, off by default); trocket evaluates every record, which is
what Java does with that option off.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from trocket.codecs.bodies.client import EXPRESSION_TYPE_SQL92, SubscriptionData
from trocket.codecs.message.properties import PROPERTY_RETRY_TOPIC, decode_properties
from trocket.codecs.message.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX
from trocket.codecs.sql92 import CompiledFilter, FilterCompileError, compile_filter

if TYPE_CHECKING:
    from .client_manager import ConsumerManager

__all__ = ["ConsumerFilters", "FilterData", "RecordFilter", "record_properties_bytes"]

log = logging.getLogger(__name__)

#: a stored record -> whether the pull delivers it
RecordFilter = Callable[[memoryview], bool]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_BODYLEN_AT = 84  # IPv4 born and store hosts
#: compiled expressions kept at most (Java's parse cache holds 100; the filter data of
#: live groups is kept besides); beyond it the oldest entries go
MAX_CACHED = 4096
#: ``filterDataCleanTimeSpan``: filter data no heartbeat subscribes with any more is kept
#: this long (seconds; a group that comes back within it finds it), then dropped
FILTER_DATA_CLEAN_S = 24 * 3600.0


def record_properties_bytes(record: memoryview | bytes) -> memoryview | bytes:
    """The properties string of a stored record (UTF-8 bytes), without decoding the rest."""
    (sys_flag,) = _I32.unpack_from(record, 36)
    at = _BODYLEN_AT
    if sys_flag & BORNHOST_V6_FLAG:
        at += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        at += 12
    (body_len,) = _I32.unpack_from(record, at)
    at += 4 + body_len
    at += 1 + record[at]
    (props_len,) = _I16.unpack_from(record, at)
    at += 2
    return record[at : at + props_len]


def _record_properties(record: memoryview) -> dict[str, str]:
    return decode_properties(str(record_properties_bytes(record), "utf-8", "replace"))


def _sql_filter(compiled: CompiledFilter) -> RecordFilter:
    """The record test of a pull: :func:`record_properties_bytes` inlined and the
    expression's generated evaluator (:mod:`trocket.codecs.sql92.codegen`) on the
    properties string (one Python call below this one per record: this runs for every
    record a filtered pull reads)."""
    evaluate = compiled.evaluate_text
    i32 = _I32.unpack_from
    v6 = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG

    def matches(record: memoryview) -> bool:
        at = _BODYLEN_AT
        flags = record[39] & v6  # the low byte of the big-endian SYSFLAG at 36 holds both
        if flags:
            at += 12 * ((flags & BORNHOST_V6_FLAG != 0) + (flags & STOREHOSTADDRESS_V6_FLAG != 0))
        at += 4 + i32(record, at)[0]
        at += 3 + record[at]
        end = at + (record[at - 2] << 8 | record[at - 1])
        try:
            return evaluate(str(record[at:end], "utf-8", "replace")) is True
        except Exception:  # Java: any Throwable of the evaluation is "no match"
            return False

    return matches


@attrs.define(slots=True, frozen=True)
class FilterData:
    """``ConsumerFilterData``: a group's SQL92 expression for a topic, compiled, and the
    ``subVersion`` (``clientVersion``) of the heartbeat that registered it."""

    expression: str
    compiled: CompiledFilter
    client_version: int


class ConsumerFilters:
    """The compiled SQL92 expressions of the broker's consumer groups, by (group, topic,
    expression), and each group's registered filter data per topic (``ConsumerFilterManager``:
    what its heartbeats said, by Java's rules: a newer ``subVersion`` replaces it, an older
    or equal one is ignored, a newer one that does not compile removes it)."""

    def __init__(self, consumers: ConsumerManager) -> None:
        self.consumers = consumers
        self._data: dict[tuple[str, str], FilterData] = {}
        #: (group, topic) of filter data no live subscription uses -> since when (the
        #: consumer manager's clock, seconds): Java's ``deadTime``
        self._dead: dict[tuple[str, str], float] = {}
        self._compiled: dict[tuple[str, str, str], CompiledFilter | FilterCompileError] = {}
        self._filters: dict[tuple[str, str, str], RecordFilter] = {}
        #: counters (runtime info)
        self.compiled = 0
        self.compile_errors = 0

    def compile(self, group: str, topic: str, expression: str) -> CompiledFilter:
        """The expression compiled (cached); :class:`FilterCompileError` (cached too)."""
        key = (group, topic, expression)
        got = self._compiled.get(key)
        if got is None:
            try:
                got = compile_filter(expression)
                self.compiled += 1
            except FilterCompileError as exc:
                got = exc
                self.compile_errors += 1
                log.warning("consumer group %s: the SQL92 expression of %s does not compile: %s", group, topic,
                            exc.remark)
            if len(self._compiled) >= MAX_CACHED:
                for old in list(self._compiled)[: MAX_CACHED // 4]:
                    self._compiled.pop(old, None)
                    self._filters.pop(old, None)
            self._compiled[key] = got
        if isinstance(got, FilterCompileError):
            raise got
        return got

    def register(self, group: str, subscriptions: list[SubscriptionData]) -> None:
        """A heartbeat's subscriptions (``ConsumerFilterManager.register``): each SQL92
        one compiled now (errors are logged and cached) and made the group's filter data
        for its topic when there is none or its ``sub_version`` is newer; a newer one that
        does not compile removes it (the pull answers FILTER_DATA_NOT_EXIST, as Java)."""
        for sub in subscriptions:
            if sub.expression_type != EXPRESSION_TYPE_SQL92 or not sub.sub_string:
                continue  # Java: a TAG subscription leaves the filter data as it is
            key = (group, sub.topic)
            old = self._data.get(key)
            if old is not None and sub.sub_version <= old.client_version:
                continue
            try:
                compiled = self.compile(group, sub.topic, sub.sub_string)
            except FilterCompileError:
                self._data.pop(key, None)
                continue
            self._data[key] = FilterData(sub.sub_string, compiled, sub.sub_version)
            self._dead.pop(key, None)

    def clean(self, now: float | None = None, keep: float = FILTER_DATA_CLEAN_S) -> int:
        """``ConsumerFilterManager.clean``, with its marking of the dead: filter data whose
        group no longer subscribes to its topic with SQL92 (the group gone, or its
        heartbeats changed) is marked dead, and dropped once dead for ``keep`` seconds;
        data subscribed again is alive again. Returns how many were dropped (the broker's
        client housekeeping calls it every scan, so the table is bounded by the groups
        that subscribed within a day)."""
        if now is None:
            now = self.consumers.clock()
        dropped = 0
        for key in list(self._data):
            sub = self.consumers.find_subscription(*key)
            if sub is not None and sub.expression_type == EXPRESSION_TYPE_SQL92 and sub.sub_string:
                self._dead.pop(key, None)
                continue
            since = self._dead.setdefault(key, now)
            if now - since >= keep:
                del self._data[key]
                del self._dead[key]
                dropped += 1
                log.info("consumer group %s: the SQL92 filter data of %s dropped (unused for %.0f s)", key[0], key[1],
                         now - since)
        return dropped

    def filter_data(self, group: str, topic: str) -> FilterData | None:
        """``ConsumerFilterManager.get(topic, group)``: the group's registered filter data."""
        return self._data.get((group, topic))

    def record_filter(self, group: str, topic: str, expression: str) -> RecordFilter:
        """The pull's test of a record for a SQL92 subscription (raises
        :class:`FilterCompileError` for an expression that does not compile)."""
        key = (group, topic, expression)
        got = self._filters.get(key)
        if got is None:
            got = self._filters[key] = _sql_filter(self.compile(group, topic, expression))
        return got

    def registered(self, group: str, topic: str) -> CompiledFilter | None:
        """The group's compiled SQL92 expression for ``topic`` while its heartbeats
        subscribe with one (the filter data's, as Java filters with); None else."""
        sub = self.consumers.find_subscription(group, topic)
        if sub is None or sub.expression_type != EXPRESSION_TYPE_SQL92 or not sub.sub_string:
            return None
        data = self._data.get((group, topic))
        return None if data is None else data.compiled

    def retry_filter(self, group: str) -> RecordFilter:
        """``ExpressionForRetryMessageFilter`` on ``%RETRY%<group>``: each record tested
        with the group's expression for its original topic (``RETRY_TOPIC``)."""

        def matches(record: memoryview) -> bool:
            props = _record_properties(record)
            real_topic = props.get(PROPERTY_RETRY_TOPIC)
            compiled = None if real_topic is None else self.registered(group, real_topic)
            if compiled is None:
                return True
            try:
                return compiled.evaluate(props) is True
            except Exception:
                return False

        return matches

    @staticmethod
    def is_retry_topic_of(topic: str, group: str) -> bool:
        return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and topic[len(RETRY_GROUP_TOPIC_PREFIX):] == group
