"""Statistics bodies (RocketMQ 4.9.8), written as its fastjson writes them:

* :class:`BrokerStatsData` (``BrokerStatsItem`` x3): VIEW_BROKER_STATS_DATA (315);
* :class:`ConsumeStats` (``OffsetWrapper`` per ``MessageQueue``): GET_CONSUME_STATS (208),
  and inside :class:`ConsumeStatsList`: GET_BROKER_CONSUME_STATS (317);
* :class:`TopicStatsTable` (``TopicOffset`` per ``MessageQueue``): GET_TOPIC_STATS_INFO (202);
* :class:`QueryConsumeTimeSpanBody` (``QueueTimeSpan``): QUERY_CONSUME_TIME_SPAN (303).

Maps keyed by ``MessageQueue`` are written with the queue as an object key
(``{{"brokerName":..,"queueId":0,"topic":..}:{...}}``), in ``HashMap`` order of
``MessageQueue.hashCode``, and read back from that form (:func:`~.fastjson.loads`).
"""

from __future__ import annotations

from typing import Any

import attrs

from .client import MessageQueue
from .fastjson import Bean, BodyDecodeError, dumps_bytes
from .route import parse_body, read_int, read_list, read_object, read_str

__all__ = [
    "BrokerStatsItem",
    "BrokerStatsData",
    "OffsetWrapper",
    "ConsumeStats",
    "ConsumeStatsList",
    "TopicOffset",
    "TopicStatsTable",
    "QueueTimeSpan",
    "QueryConsumeTimeSpanBody",
]


def read_float(obj: dict[str, Any], key: str, where: str, default: float = 0.0) -> float:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyDecodeError(f"{where}.{key}: expected a number, got {value!r}")


def _mq_map(raw: Any, where: str, read_value) -> dict[MessageQueue, Any]:
    out: dict[MessageQueue, Any] = {}
    for key, value in read_object(raw if raw is not None else {}, where).items():
        if isinstance(key, str):
            raise BodyDecodeError(f"{where}: key {key!r} is not a MessageQueue")
        mq = MessageQueue.from_key(key, f"{where} key")
        out[mq] = read_value(read_object(value, f"{where}[{mq}]"), f"{where}[{mq}]")
    return out


# -- VIEW_BROKER_STATS_DATA -------------------------------------------------------------


@attrs.define(slots=True, frozen=True)
class BrokerStatsItem:
    """``BrokerStatsItem``: a window's sum, TPS and average per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> Bean:
        return Bean(avgpt=float(self.avgpt), sum=self.sum, tps=float(self.tps))

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> BrokerStatsItem:
        return cls(read_int(obj, "sum", where, 0), read_float(obj, "tps", where), read_float(obj, "avgpt", where))


@attrs.define(slots=True, frozen=True)
class BrokerStatsData:
    """``BrokerStatsData``: the last minute, hour and day of one stats item."""

    stats_minute: BrokerStatsItem
    stats_hour: BrokerStatsItem
    stats_day: BrokerStatsItem

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(
            statsDay=self.stats_day.to_json(), statsHour=self.stats_hour.to_json(), statsMinute=self.stats_minute.to_json(),
        ))

    @classmethod
    def from_body(cls, data: bytes | str) -> BrokerStatsData:
        where = "BrokerStatsData"
        obj = read_object(parse_body(data, where), where)

        def item(name: str) -> BrokerStatsItem:
            raw = obj.get(name)
            return BrokerStatsItem() if raw is None else BrokerStatsItem.from_json(read_object(raw, f"{where}.{name}"), f"{where}.{name}")

        return cls(item("statsMinute"), item("statsHour"), item("statsDay"))


# -- GET_CONSUME_STATS / GET_BROKER_CONSUME_STATS ----------------------------------------


@attrs.define(slots=True, frozen=True)
class OffsetWrapper:
    """``OffsetWrapper``: a queue's max offset, the group's offset, the store time of
    the last message it consumed."""

    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    def to_json(self) -> Bean:
        return Bean(brokerOffset=self.broker_offset, consumerOffset=self.consumer_offset, lastTimestamp=self.last_timestamp)

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> OffsetWrapper:
        return cls(read_int(obj, "brokerOffset", where, 0), read_int(obj, "consumerOffset", where, 0),
                   read_int(obj, "lastTimestamp", where, 0))


@attrs.define(slots=True)
class ConsumeStats:
    """``ConsumeStats``: a group's offsets per queue and its consume TPS."""

    offset_table: dict[MessageQueue, OffsetWrapper] = attrs.field(factory=dict)
    consume_tps: float = 0.0

    @property
    def total_diff(self) -> int:
        """``computeTotalDiff``."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def to_json(self) -> Bean:
        return Bean(consumeTps=float(self.consume_tps), offsetTable={mq: w.to_json() for mq, w in self.offset_table.items()})

    def to_body(self) -> bytes:
        return dumps_bytes(self.to_json())

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str = "ConsumeStats") -> ConsumeStats:
        table = _mq_map(obj.get("offsetTable"), f"{where}.offsetTable", OffsetWrapper.from_json)
        return cls(table, read_float(obj, "consumeTps", where))

    @classmethod
    def from_body(cls, data: bytes | str) -> ConsumeStats:
        return cls.from_json(read_object(parse_body(data, "ConsumeStats"), "ConsumeStats"))


@attrs.define(slots=True)
class ConsumeStatsList:
    """``ConsumeStatsList``: per subscription group, its ``ConsumeStats`` per topic (a
    list of one-entry maps, as Java builds it), the broker's address and the total diff."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = attrs.field(factory=list)
    broker_addr: str | None = None
    total_diff: int = 0

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(
            brokerAddr=self.broker_addr,
            consumeStatsList=[{g: [cs.to_json() for cs in stats] for g, stats in m.items()} for m in self.consume_stats_list],
            totalDiff=self.total_diff,
        ))

    @classmethod
    def from_body(cls, data: bytes | str) -> ConsumeStatsList:
        where = "ConsumeStatsList"
        obj = read_object(parse_body(data, where), where)
        out = []
        for i, raw in enumerate(read_list(obj.get("consumeStatsList"), f"{where}.consumeStatsList")):
            entry = {}
            for group, stats in read_object(raw, f"{where}.consumeStatsList[{i}]").items():
                at = f"{where}.consumeStatsList[{i}][{group!r}]"
                entry[str(group)] = [ConsumeStats.from_json(read_object(s, at), at) for s in read_list(stats, at)]
            out.append(entry)
        return cls(out, read_str(obj, "brokerAddr", where, required=False), read_int(obj, "totalDiff", where, 0))


# -- GET_TOPIC_STATS_INFO ----------------------------------------------------------------


@attrs.define(slots=True, frozen=True)
class TopicOffset:
    """``TopicOffset``: a queue's min and max offsets, the store time of its last message."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0

    def to_json(self) -> Bean:
        return Bean(lastUpdateTimestamp=self.last_update_timestamp, maxOffset=self.max_offset, minOffset=self.min_offset)

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> TopicOffset:
        return cls(read_int(obj, "minOffset", where, 0), read_int(obj, "maxOffset", where, 0),
                   read_int(obj, "lastUpdateTimestamp", where, 0))


@attrs.define(slots=True)
class TopicStatsTable:
    """``TopicStatsTable``: a topic's offsets per queue."""

    offset_table: dict[MessageQueue, TopicOffset] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(offsetTable={mq: o.to_json() for mq, o in self.offset_table.items()}))

    @classmethod
    def from_body(cls, data: bytes | str) -> TopicStatsTable:
        where = "TopicStatsTable"
        obj = read_object(parse_body(data, where), where)
        return cls(_mq_map(obj.get("offsetTable"), f"{where}.offsetTable", TopicOffset.from_json))


# -- QUERY_CONSUME_TIME_SPAN -------------------------------------------------------------


@attrs.define(slots=True, frozen=True)
class QueueTimeSpan:
    """``QueueTimeSpan``: a queue's first and last store times, the group's consume
    time and how long its next message has waited (``delayTime``)."""

    message_queue: MessageQueue
    min_timestamp: int
    max_timestamp: int
    consume_timestamp: int
    delay_time: int = 0

    def to_json(self) -> Bean:
        # Java's fastjson also writes its getters getMinTimeStampStr & co. (the times as
        # local-time text); no reader needs them (they have no setters), and codecs has
        # no clock or time zone, so they are left out
        return Bean(
            consumeTimeStamp=self.consume_timestamp, delayTime=self.delay_time, maxTimeStamp=self.max_timestamp,
            messageQueue=self.message_queue.to_json(), minTimeStamp=self.min_timestamp,
        )

    @classmethod
    def from_json(cls, obj: dict[str, Any], where: str) -> QueueTimeSpan:
        mq = MessageQueue.from_json(obj.get("messageQueue"), f"{where}.messageQueue")
        return cls(mq, read_int(obj, "minTimeStamp", where, 0), read_int(obj, "maxTimeStamp", where, 0),
                   read_int(obj, "consumeTimeStamp", where, 0), read_int(obj, "delayTime", where, 0))


@attrs.define(slots=True)
class QueryConsumeTimeSpanBody:
    """``QueryConsumeTimeSpanBody``: ``{"consumeTimeSpanSet": [QueueTimeSpan...]}``."""

    consume_time_span_set: list[QueueTimeSpan] = attrs.field(factory=list)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(consumeTimeSpanSet=[t.to_json() for t in self.consume_time_span_set]))

    @classmethod
    def from_body(cls, data: bytes | str) -> QueryConsumeTimeSpanBody:
        where = "QueryConsumeTimeSpanBody"
        obj = read_object(parse_body(data, where), where)
        items = read_list(obj.get("consumeTimeSpanSet"), f"{where}.consumeTimeSpanSet")
        return cls([QueueTimeSpan.from_json(read_object(t, f"{where}[{i}]"), f"{where}[{i}]") for i, t in enumerate(items)])
