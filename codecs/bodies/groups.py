"""Consumer-group administration bodies (RocketMQ 4.9.8), as its fastjson writes them:

* :class:`SubscriptionGroupConfig`: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) body; inside
  :class:`SubscriptionGroupWrapper`, GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and the
  broker's ``subscriptionGroup.json``;
* :class:`ConsumerConnection` / :class:`ProducerConnection` (``Connection``s):
  GET_CONSUMER_CONNECTION_LIST (203) / GET_PRODUCER_CONNECTION_LIST (204);
* :class:`GroupList`: QUERY_TOPIC_CONSUME_BY_WHO (300);
* :class:`ResetOffsetBody` (``ResetOffsetBodyForC`` for the C++ client):
  INVOKE_BROKER_TO_RESET_OFFSET (222) answer and RESET_CONSUMER_CLIENT_OFFSET (220) body;
* :class:`ProducerTableInfo` (``ProducerInfo``s): GET_ALL_PRODUCER_INFO (328);
* :class:`GetConsumerStatusBody`: GET_CONSUMER_STATUS_FROM_CLIENT (221, ``messageQueueTable``)
  and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, ``consumerTable``);
* :class:`QueryCorrectionOffsetBody`: QUERY_CORRECTION_OFFSET (308).

Decoding a :class:`SubscriptionGroupConfig` fills Java's defaults for missing fields and
raises :class:`~.fastjson.BodyDecodeError` naming a field of the wrong type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from .client import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue, SubscriptionData
from .fastjson import Bean, BodyDecodeError, dumps, dumps_bytes
from .route import java_map_order, parse_body, read_bool, read_int, read_list, read_object, read_str, write_java_map

__all__ = [
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "SUBSCRIPTION_GROUP_TABLE_CAPACITY",
    "Connection",
    "ConsumerConnection",
    "ProducerConnection",
    "GroupList",
    "ResetOffsetBody",
    "ProducerInfo",
    "ProducerTableInfo",
    "GetConsumerStatusBody",
    "QueryCorrectionOffsetBody",
]

#: ``SubscriptionGroupManager``'s ``new ConcurrentHashMap<>(1024)`` has a 2048-slot table.
SUBSCRIPTION_GROUP_TABLE_CAPACITY = 2048
_I32 = (-(2**31), 2**31 - 1)


def _read_int32(obj: dict[str, Any], key: str, where: str, default: int) -> int:
    value = read_int(obj, key, where, default)
    if not _I32[0] <= value <= _I32[1]:
        raise BodyDecodeError(f"{where}.{key}: {value} is out of an int's range")
    return value


def _read_bool_strict(obj: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BodyDecodeError(f"{where}.{key}: expected a boolean, got {value!r}")


@attrs.frozen(slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` with Java's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> Bean:
        return Bean(
            brokerId=self.broker_id,
            consumeBroadcastEnable=self.consume_broadcast_enable,
            consumeEnable=self.consume_enable,
            consumeFromMinEnable=self.consume_from_min_enable,
            groupName=self.group_name,
            notifyConsumerIdsChangedEnable=self.notify_consumer_ids_changed_enable,
            retryMaxTimes=self.retry_max_times,
            retryQueueNums=self.retry_queue_nums,
            whichBrokerWhenConsumeSlowly=self.which_broker_when_consume_slowly,
        )

    def to_body(self) -> bytes:
        return dumps_bytes(self.to_json())

    @classmethod
    def from_json(cls, value: Any, where: str = "SubscriptionGroupConfig") -> SubscriptionGroupConfig:
        obj = read_object(value, where)
        name = read_str(obj, "groupName", where)
        assert name is not None
        return cls(
            group_name=name,
            consume_enable=_read_bool_strict(obj, "consumeEnable", where, True),
            consume_from_min_enable=_read_bool_strict(obj, "consumeFromMinEnable", where, True),
            consume_broadcast_enable=_read_bool_strict(obj, "consumeBroadcastEnable", where, True),
            retry_queue_nums=_read_int32(obj, "retryQueueNums", where, 1),
            retry_max_times=_read_int32(obj, "retryMaxTimes", where, 16),
            broker_id=read_int(obj, "brokerId", where, 0),
            which_broker_when_consume_slowly=read_int(obj, "whichBrokerWhenConsumeSlowly", where, 1),
            notify_consumer_ids_changed_enable=_read_bool_strict(obj, "notifyConsumerIdsChangedEnable", where, True),
        )

    @classmethod
    def from_body(cls, data: bytes | str) -> SubscriptionGroupConfig:
        return cls.from_json(parse_body(data, "SubscriptionGroupConfig"))

    def java_string(self) -> str:
        """``SubscriptionGroupConfig.toString()`` (logs, remarks)."""
        b = lambda v: "true" if v else "false"  # noqa: E731
        return (
            f"SubscriptionGroupConfig [groupName={self.group_name}, consumeEnable={b(self.consume_enable)}, "
            f"consumeFromMinEnable={b(self.consume_from_min_enable)}, consumeBroadcastEnable="
            f"{b(self.consume_broadcast_enable)}, retryQueueNums={self.retry_queue_nums}, retryMaxTimes="
            f"{self.retry_max_times}, brokerId={self.broker_id}, whichBrokerWhenConsumeSlowly="
            f"{self.which_broker_when_consume_slowly}, notifyConsumerIdsChangedEnable="
            f"{b(self.notify_consumer_ids_changed_enable)}]"
        )


@attrs.define(slots=True)
class SubscriptionGroupWrapper:
    """``SubscriptionGroupWrapper`` (and ``SubscriptionGroupManager``'s JSON): the
    table by group name and its data version."""

    table: dict[str, SubscriptionGroupConfig] = attrs.field(factory=dict)
    counter: int = 0
    timestamp: int = 0

    def to_body(self) -> bytes:
        table = write_java_map({n: c.to_json() for n, c in self.table.items()}, SUBSCRIPTION_GROUP_TABLE_CAPACITY)
        version = dumps(Bean(counter=self.counter, timestamp=self.timestamp))
        return ('{"dataVersion":' + version + ',"subscriptionGroupTable":' + table + "}").encode("utf-8")

    @classmethod
    def from_body(cls, data: bytes | str) -> SubscriptionGroupWrapper:
        where = "SubscriptionGroupWrapper"
        obj = read_object(parse_body(data, where), where)
        raw = obj.get("subscriptionGroupTable")
        table = {}
        for name, value in read_object(raw if raw is not None else {}, f"{where}.subscriptionGroupTable").items():
            table[str(name)] = SubscriptionGroupConfig.from_json(value, f"{where}.subscriptionGroupTable[{name!r}]")
        version = obj.get("dataVersion")
        version = read_object(version, f"{where}.dataVersion") if version is not None else {}
        return cls(table, read_int(version, "counter", f"{where}.dataVersion", 0),
                   read_int(version, "timestamp", f"{where}.dataVersion", 0))


# -- connections --------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Connection:
    """``Connection``: one client connection of a group (``language`` a LanguageCode name)."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> Bean:
        return Bean(clientAddr=self.client_addr, clientId=self.client_id, language=self.language, version=self.version)

    @classmethod
    def from_json(cls, value: Any, where: str) -> Connection:
        obj = read_object(value, where)
        language = obj.get("language")
        return cls(read_str(obj, "clientId", where, required=False) or "",
                   read_str(obj, "clientAddr", where, required=False) or "",
                   str(language) if language is not None else "", read_int(obj, "version", where, 0))


def _connections(obj: dict[str, Any], where: str) -> list[Connection]:
    return [Connection.from_json(c, f"{where}.connectionSet[{i}]")
            for i, c in enumerate(read_list(obj.get("connectionSet"), f"{where}.connectionSet"))]


@attrs.define(slots=True)
class ConsumerConnection:
    """``ConsumerConnection``: a consumer group's connections, subscriptions and modes."""

    connections: list[Connection] = attrs.field(factory=list)
    subscriptions: dict[str, SubscriptionData] = attrs.field(factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(
            connectionSet=[c.to_json() for c in self.connections],
            consumeFromWhere=self.consume_from_where.name if self.consume_from_where is not None else None,
            consumeType=self.consume_type.name if self.consume_type is not None else None,
            messageModel=self.message_model.name if self.message_model is not None else None,
            subscriptionTable={t: s.to_json() for t, s in self.subscriptions.items()},
        ))

    @classmethod
    def from_body(cls, data: bytes | str) -> ConsumerConnection:
        where = "ConsumerConnection"
        obj = read_object(parse_body(data, where), where)
        subs = obj.get("subscriptionTable")
        subscriptions = {
            str(t): SubscriptionData.from_json(s, f"{where}.subscriptionTable[{t!r}]")
            for t, s in read_object(subs if subs is not None else {}, f"{where}.subscriptionTable").items()
        }

        def enum(cls_, name: str):
            value = obj.get(name)
            if value is None:
                return None
            try:
                return cls_[value] if isinstance(value, str) else cls_(value)
            except (KeyError, ValueError):
                raise BodyDecodeError(f"{where}.{name}: unknown {cls_.__name__} {value!r}") from None

        return cls(_connections(obj, where), subscriptions, enum(ConsumeType, "consumeType"),
                   enum(MessageModel, "messageModel"), enum(ConsumeFromWhere, "consumeFromWhere"))


@attrs.define(slots=True)
class ProducerConnection:
    """``ProducerConnection``: a producer group's connections."""

    connections: list[Connection] = attrs.field(factory=list)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(connectionSet=[c.to_json() for c in self.connections]))

    @classmethod
    def from_body(cls, data: bytes | str) -> ProducerConnection:
        where = "ProducerConnection"
        return cls(_connections(read_object(parse_body(data, where), where), where))


@attrs.define(slots=True)
class GroupList:
    """``GroupList``: ``{"groupList": [...]}`` (a Java ``HashSet``, in its order)."""

    groups: list[str] = attrs.field(factory=list)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(groupList=java_map_order(sorted(set(self.groups)))))

    @classmethod
    def from_body(cls, data: bytes | str) -> GroupList:
        where = "GroupList"
        obj = read_object(parse_body(data, where), where)
        items = read_list(obj.get("groupList"), f"{where}.groupList")
        return cls([str(g) for g in items])


# -- resetting offsets ------------------------------------------------------------------


@attrs.define(slots=True)
class ResetOffsetBody:
    """``ResetOffsetBody``: the new offset per queue. The C++ client reads
    ``ResetOffsetBodyForC`` instead: a list of ``MessageQueueForC`` (the queue's fields
    and its ``offset``) -- :meth:`to_body_for_c`."""

    offset_table: dict[MessageQueue, int] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(offsetTable=dict(self.offset_table)))

    def to_body_for_c(self) -> bytes:
        return dumps_bytes(Bean(offsetTable=[
            Bean(brokerName=mq.broker_name, offset=offset, queueId=mq.queue_id, topic=mq.topic)
            for mq, offset in self.offset_table.items()
        ]))

    @classmethod
    def from_body(cls, data: bytes | str) -> ResetOffsetBody:
        where = "ResetOffsetBody"
        obj = read_object(parse_body(data, where), where)
        raw = obj.get("offsetTable")
        table: dict[MessageQueue, int] = {}
        if isinstance(raw, list):  # ResetOffsetBodyForC
            for i, item in enumerate(raw):
                entry = read_object(item, f"{where}.offsetTable[{i}]")
                table[MessageQueue.from_json(entry, f"{where}.offsetTable[{i}]")] = read_int(entry, "offset", where, 0)
            return cls(table)
        return cls(_offset_table(raw, f"{where}.offsetTable"))


def _offset_table(raw: Any, where: str) -> dict[MessageQueue, int]:
    """A ``Map<MessageQueue, Long>`` as fastjson writes it (object keys)."""
    table: dict[MessageQueue, int] = {}
    for key, value in read_object(raw if raw is not None else {}, where).items():
        if isinstance(key, str):
            raise BodyDecodeError(f"{where}: key {key!r} is not a MessageQueue")
        if not isinstance(value, int) or isinstance(value, bool):
            raise BodyDecodeError(f"{where}: offset {value!r} is not an integer")
        table[MessageQueue.from_key(key, f"{where} key")] = value
    return table


# -- producers and consumer status ------------------------------------------------------


@attrs.define(slots=True, frozen=True)
class ProducerInfo:
    """``ProducerInfo``: one producer connection. ``remote_ip`` is Java's
    ``remoteAddress().toString()``: ``/127.0.0.1:54321``; ``last_update_timestamp`` the
    last heartbeat, epoch ms."""

    client_id: str
    remote_ip: str
    language: str
    version: int
    last_update_timestamp: int

    def to_json(self) -> Bean:
        return Bean(clientId=self.client_id, language=self.language, lastUpdateTimestamp=self.last_update_timestamp,
                    remoteIP=self.remote_ip, version=self.version)

    @classmethod
    def from_json(cls, obj: Any, where: str) -> ProducerInfo:
        obj = read_object(obj, where)
        return cls(
            read_str(obj, "clientId", where) or "",
            read_str(obj, "remoteIP", where, required=False) or "",
            read_str(obj, "language", where, required=False) or "",
            read_int(obj, "version", where, 0),
            read_int(obj, "lastUpdateTimestamp", where, 0),
        )


@attrs.define(slots=True)
class ProducerTableInfo:
    """``ProducerTableInfo``: ``{"data": {group: [ProducerInfo...]}}`` (a ``HashMap``)."""

    data: dict[str, list[ProducerInfo]] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(data={g: [p.to_json() for p in ps] for g, ps in self.data.items()}))

    @classmethod
    def from_body(cls, data: bytes | str) -> ProducerTableInfo:
        where = "ProducerTableInfo"
        obj = read_object(parse_body(data, where), where)
        table: dict[str, list[ProducerInfo]] = {}
        for group, items in read_object(obj.get("data") or {}, f"{where}.data").items():
            w = f"{where}.data[{group!r}]"
            table[str(group)] = [ProducerInfo.from_json(item, f"{w}[{i}]") for i, item in enumerate(read_list(items, w))]
        return cls(table)


@attrs.define(slots=True)
class GetConsumerStatusBody:
    """``GetConsumerStatusBody``: a client's offsets (``messageQueueTable``, its answer
    to 221) or every client's by client id (``consumerTable``, the broker's to 223);
    both maps are always written, empty or not."""

    message_queue_table: dict[MessageQueue, int] = attrs.field(factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(
            consumerTable={cid: dict(t) for cid, t in self.consumer_table.items()},
            messageQueueTable=dict(self.message_queue_table),
        ))

    @classmethod
    def from_body(cls, data: bytes | str) -> GetConsumerStatusBody:
        where = "GetConsumerStatusBody"
        obj = read_object(parse_body(data, where), where)
        consumers = {
            str(cid): _offset_table(t, f"{where}.consumerTable[{cid!r}]")
            for cid, t in read_object(obj.get("consumerTable") or {}, f"{where}.consumerTable").items()
        }
        return cls(_offset_table(obj.get("messageQueueTable"), f"{where}.messageQueueTable"), consumers)


@attrs.define(slots=True)
class QueryCorrectionOffsetBody:
    """``QueryCorrectionOffsetBody``: queue id -> offset (``Long.MAX_VALUE``: the compared
    group is behind every other group there)."""

    correction_offsets: dict[int, int] = attrs.field(factory=dict)

    def to_body(self) -> bytes:
        return dumps_bytes(Bean(correctionOffsets=dict(self.correction_offsets)))

    @classmethod
    def from_body(cls, data: bytes | str) -> QueryCorrectionOffsetBody:
        where = "QueryCorrectionOffsetBody"
        obj = read_object(parse_body(data, where), where)
        table: dict[int, int] = {}
        for key, value in read_object(obj.get("correctionOffsets") or {}, f"{where}.correctionOffsets").items():
            try:
                qid = int(key)
            except (TypeError, ValueError):
                raise BodyDecodeError(f"{where}.correctionOffsets: key {key!r} is not a queue id") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise BodyDecodeError(f"{where}.correctionOffsets: offset {value!r} is not an integer")
            table[qid] = value
        return cls(table)


def connections_of(items: Iterable[tuple[str, str, str, int]]) -> list[Connection]:
    """``[(client id, address, language, version)...]`` -> ``[Connection...]``."""
    return [Connection(*item) for item in items]
