"""Client-management bodies (RocketMQ 4.9.8): heartbeats, consumer lists, queue locks.

Java classes, and the codes that carry them:

* ``HeartbeatData`` / ``ConsumerData`` / ``ProducerData`` / ``SubscriptionData``:
  HEART_BEAT (34) request body;
* ``GetConsumerListByGroupResponseBody``: GET_CONSUMER_LIST_BY_GROUP (38) response body;
* ``LockBatchRequestBody`` / ``LockBatchResponseBody``: LOCK_BATCH_MQ (41);
  ``UnlockBatchRequestBody``: UNLOCK_BATCH_MQ (42); ``MessageQueue`` inside them.

Decoding is lenient the way real clients need (``shared/REAL-CLIENTS.md`` §4.2):

* enums as ordinals (the C++ client: ``"consumeType":1``) or names (the JS client and
  Java's fastjson: ``"CONSUME_PASSIVELY"``), also digit strings and the enums'
  ``typeCN`` aliases (``"PUSH"``, ``"PULL"``);
* numbers as JSON numbers or digit strings (``subVersion`` is a string from C++, a
  number from JS);
* missing or ``null`` arrays are empty; unknown keys are ignored (JS sends
  ``unitMode``, ``tagsSet``, ``codeSet``, ``classFilterMode``; 5.x Java sends
  ``heartbeatFingerprint``...).

Anything else (not JSON, not an object, a required name missing, a value of the wrong
type, an enum value out of range) raises :class:`BodyDecodeError` naming the field.

Encoding writes what Java's fastjson writes: beans with properties sorted by name,
nulls left out, enums by name (:func:`~.fastjson.dumps`).
"""

from __future__ import annotations

import enum
from typing import Any, Iterable, TypeVar

import attrs

from ..java_hashmap import java_string_hash
from ..java_ints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from .fastjson import Bean, BodyDecodeError, dumps_bytes, loads

__all__ = [
    "BodyDecodeError",
    "ConsumeType",
    "MessageModel",
    "ConsumeFromWhere",
    "SubscriptionData",
    "ConsumerData",
    "ProducerData",
    "HeartbeatData",
    "MessageQueue",
    "ConsumerListByGroupResponseBody",
    "CheckClientRequestBody",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "UnlockBatchRequestBody",
    "EXPRESSION_TYPE_TAG",
    "EXPRESSION_TYPE_SQL92",
    "SUB_ALL",
    "build_subscription",
]

#: ``ExpressionType.TAG`` / ``SQL92``; ``SubscriptionData.SUB_ALL``.
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"
SUB_ALL = "*"


class ConsumeType(enum.IntEnum):
    """``ConsumeType``: ordinal 0 = pull consumer, 1 = push consumer."""

    CONSUME_ACTIVELY = 0  # typeCN "PULL"
    CONSUME_PASSIVELY = 1  # typeCN "PUSH"


class MessageModel(enum.IntEnum):
    """``MessageModel``."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """``ConsumeFromWhere`` of 4.9.8 (1-3 are deprecated but still ordinals)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


_ENUM_ALIASES: dict[type, dict[str, enum.IntEnum]] = {
    ConsumeType: {"PULL": ConsumeType.CONSUME_ACTIVELY, "PUSH": ConsumeType.CONSUME_PASSIVELY},
}

E = TypeVar("E", bound=enum.IntEnum)


# -- field readers --------------------------------------------------------------------


def _where(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _object(value: Any, where: str) -> dict:
    if type(value) is not dict:
        raise BodyDecodeError(f"{where or 'body'} is not a JSON object: {_short(value)}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _str(obj: dict, name: str, where: str, *, required: bool = False, default: str | None = None) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise BodyDecodeError(f"{_where(where, name)} is missing")
        return default
    if isinstance(value, str):
        return value
    if type(value) is int:  # a client-generated id written as a number: keep its text
        return str(value)
    raise BodyDecodeError(f"{_where(where, name)} is not a string: {_short(value)}")


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if type(value) is int:
        result = value
    elif type(value) is float and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            result = int(text, 10)
        except ValueError:
            raise BodyDecodeError(f"{what} is not an integer: {_short(value)}") from None
    else:
        raise BodyDecodeError(f"{what} is not an integer: {_short(value)}")
    if not lo <= result <= hi:
        raise BodyDecodeError(f"{what} out of range: {result}")
    return result


def _int_field(obj: dict, name: str, where: str, *, required: bool = False, default: int = 0, long: bool = False) -> int:
    value = obj.get(name)
    if value is None:
        if required:
            raise BodyDecodeError(f"{_where(where, name)} is missing")
        return default
    lo, hi = (INT64_MIN, INT64_MAX) if long else (INT32_MIN, INT32_MAX)
    return _int(value, _where(where, name), lo, hi)


def _bool(obj: dict, name: str, where: str, default: bool = False) -> bool:
    value = obj.get(name)
    if value is None:
        return default
    if value is True or value is False:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BodyDecodeError(f"{_where(where, name)} is not a boolean: {_short(value)}")


def _enum(obj: dict, name: str, where: str, cls: type[E], default: E) -> E:
    value = obj.get(name)
    if value is None:
        return default
    what = _where(where, name)
    if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
        member = cls.__members__.get(value.strip())
        if member is None:
            member = _ENUM_ALIASES.get(cls, {}).get(value.strip())
        if member is None:
            raise BodyDecodeError(f"{what}: unknown {cls.__name__} {_short(value)}")
        return member  # type: ignore[return-value]
    ordinal = _int(value, what, INT32_MIN, INT32_MAX)
    try:
        return cls(ordinal)
    except ValueError:
        raise BodyDecodeError(f"{what}: no {cls.__name__} with ordinal {ordinal}") from None


def _list(obj: dict, name: str, where: str) -> list:
    value = obj.get(name)
    if value is None:
        return []
    if type(value) is not list:
        raise BodyDecodeError(f"{_where(where, name)} is not an array: {_short(value)}")
    return value


def _load_object(body: bytes | bytearray | memoryview | str | None, what: str) -> dict:
    if body is None or len(body) == 0:
        raise BodyDecodeError(f"{what}: the body is empty")
    try:
        obj = loads(body)
    except BodyDecodeError as exc:
        raise BodyDecodeError(f"{what}: {exc}") from None
    if type(obj) is not dict:
        raise BodyDecodeError(f"{what}: the body is not a JSON object: {_short(obj)}")
    return obj


# -- subscriptions and heartbeats ----------------------------------------------------


def _tag_code(tag: str) -> int:
    h = java_string_hash(tag)
    return h - (1 << 32) if h & 0x80000000 else h


@attrs.define(slots=True)
class SubscriptionData:
    """``SubscriptionData``: one topic a consumer group subscribes to.

    ``tags_set``/``code_set`` are what the client sent (a Java client fills them; the
    C++ client leaves them out): :meth:`effective_tags` / :meth:`effective_codes`
    derive them from ``sub_string`` when absent. ``sub_version`` is 0 when not sent.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = attrs.field(factory=list)
    code_set: list[int] = attrs.field(factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @classmethod
    def from_json(cls, obj: Any, where: str = "subscriptionData") -> SubscriptionData:
        obj = _object(obj, where)
        tags = []
        for i, tag in enumerate(_list(obj, "tagsSet", where)):
            if not isinstance(tag, str):
                raise BodyDecodeError(f"{where}.tagsSet[{i}] is not a string: {_short(tag)}")
            tags.append(tag)
        codes = [
            _int(code, f"{where}.codeSet[{i}]", INT32_MIN, INT32_MAX)
            for i, code in enumerate(_list(obj, "codeSet", where))
        ]
        return cls(
            topic=_str(obj, "topic", where, required=True),  # type: ignore[arg-type]
            sub_string=_str(obj, "subString", where, default=SUB_ALL),  # type: ignore[arg-type]
            tags_set=tags,
            code_set=codes,
            sub_version=_int_field(obj, "subVersion", where, long=True),
            expression_type=_str(obj, "expressionType", where, default=EXPRESSION_TYPE_TAG) or EXPRESSION_TYPE_TAG,  # type: ignore[arg-type]
            class_filter_mode=_bool(obj, "classFilterMode", where),
        )

    def to_json(self) -> Bean:
        return Bean(
            classFilterMode=self.class_filter_mode,
            codeSet=list(self.code_set),
            expressionType=self.expression_type,
            subString=self.sub_string,
            subVersion=self.sub_version,
            tagsSet=list(self.tags_set),
            topic=self.topic,
        )

    @property
    def is_tag_type(self) -> bool:
        """``ExpressionType.isTagType``: no type or ``TAG``."""
        return not self.expression_type or self.expression_type == EXPRESSION_TYPE_TAG

    def effective_tags(self) -> list[str]:
        """The tags to filter on: ``tags_set``, else parsed from ``sub_string``
        (``"a || b"``); empty means every tag (``*``)."""
        if self.tags_set or not self.is_tag_type:
            return list(self.tags_set)
        return _parse_tags(self.sub_string)

    def effective_codes(self) -> list[int]:
        """Tag hash codes (Java ``String.hashCode``) of :meth:`effective_tags`."""
        if self.code_set:
            return list(self.code_set)
        return [_tag_code(t) for t in self.effective_tags()]


def _parse_tags(sub_string: str | None) -> list[str]:
    if sub_string is None:
        return []
    text = sub_string.strip()
    if not text or text == SUB_ALL:
        return []
    tags: list[str] = []
    for part in text.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def build_subscription(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """``FilterAPI.build``: a subscription from a PULL header's ``subscription``
    (blank or ``*`` = everything; else tags split on ``||``, each trimmed)."""
    etype = expression_type or EXPRESSION_TYPE_TAG
    if not sub_string or not sub_string.strip() or sub_string.strip() == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, [], [], sub_version, etype)
    if etype != EXPRESSION_TYPE_TAG:
        return SubscriptionData(topic, sub_string, [], [], sub_version, etype)
    tags = _parse_tags(sub_string)
    return SubscriptionData(topic, sub_string, tags, [_tag_code(t) for t in tags], sub_version, etype)


@attrs.define(slots=True)
class ConsumerData:
    """``ConsumerData``: one consumer group of a heartbeat."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: list[SubscriptionData] = attrs.field(factory=list)
    unit_mode: bool = False

    @classmethod
    def from_json(cls, obj: Any, where: str = "consumerData") -> ConsumerData:
        obj = _object(obj, where)
        subs = [
            SubscriptionData.from_json(item, f"{where}.subscriptionDataSet[{i}]")
            for i, item in enumerate(_list(obj, "subscriptionDataSet", where))
        ]
        return cls(
            group_name=_str(obj, "groupName", where, required=True),  # type: ignore[arg-type]
            consume_type=_enum(obj, "consumeType", where, ConsumeType, ConsumeType.CONSUME_PASSIVELY),
            message_model=_enum(obj, "messageModel", where, MessageModel, MessageModel.CLUSTERING),
            consume_from_where=_enum(
                obj, "consumeFromWhere", where, ConsumeFromWhere, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
            ),
            subscriptions=subs,
            unit_mode=_bool(obj, "unitMode", where),
        )

    def to_json(self) -> Bean:
        return Bean(
            consumeFromWhere=self.consume_from_where.name,
            consumeType=self.consume_type.name,
            groupName=self.group_name,
            messageModel=self.message_model.name,
            subscriptionDataSet=[s.to_json() for s in self.subscriptions],
            unitMode=self.unit_mode,
        )


@attrs.define(slots=True)
class ProducerData:
    """``ProducerData``."""

    group_name: str

    @classmethod
    def from_json(cls, obj: Any, where: str = "producerData") -> ProducerData:
        obj = _object(obj, where)
        return cls(_str(obj, "groupName", where, required=True))  # type: ignore[arg-type]

    def to_json(self) -> Bean:
        return Bean(groupName=self.group_name)


@attrs.define(slots=True)
class HeartbeatData:
    """``HeartbeatData``: the HEART_BEAT (34) body."""

    client_id: str
    producers: list[ProducerData] = attrs.field(factory=list)
    consumers: list[ConsumerData] = attrs.field(factory=list)

    @classmethod
    def from_json(cls, obj: Any) -> HeartbeatData:
        obj = _object(obj, "heartbeat")
        return cls(
            client_id=_str(obj, "clientID", "", required=True),  # type: ignore[arg-type]
            producers=[
                ProducerData.from_json(item, f"producerDataSet[{i}]")
                for i, item in enumerate(_list(obj, "producerDataSet", ""))
            ],
            consumers=[
                ConsumerData.from_json(item, f"consumerDataSet[{i}]")
                for i, item in enumerate(_list(obj, "consumerDataSet", ""))
            ],
        )

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview | str | None) -> HeartbeatData:
        return cls.from_json(_load_object(body, "heartbeat"))

    def to_json(self) -> Bean:
        return Bean(
            clientID=self.client_id,
            consumerDataSet=[c.to_json() for c in self.consumers],
            producerDataSet=[p.to_json() for p in self.producers],
        )

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())


@attrs.define(slots=True)
class CheckClientRequestBody:
    """``CheckClientRequestBody`` (CHECK_CLIENT_CONFIG, 46): a consumer asks a broker
    whether it can serve one subscription (a SQL92 one) before it starts."""

    client_id: str
    group: str
    subscription: SubscriptionData

    def to_json(self) -> Bean:
        return Bean(clientId=self.client_id, group=self.group, subscriptionData=self.subscription.to_json())

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())


# -- consumer list -----------------------------------------------------------------------


@attrs.define(slots=True)
class ConsumerListByGroupResponseBody:
    """``GetConsumerListByGroupResponseBody``: ``{"consumerIdList":[clientID...]}``."""

    consumer_id_list: list[str] = attrs.field(factory=list)

    def to_json(self) -> Bean:
        return Bean(consumerIdList=list(self.consumer_id_list))

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview | str | None) -> ConsumerListByGroupResponseBody:
        obj = _load_object(body, "consumer list")
        ids = []
        for i, item in enumerate(_list(obj, "consumerIdList", "")):
            if not isinstance(item, str):
                raise BodyDecodeError(f"consumerIdList[{i}] is not a string: {_short(item)}")
            ids.append(item)
        return cls(ids)


# -- message queues and locks -----------------------------------------------------------


@attrs.frozen(slots=True, order=True)
class MessageQueue:
    """``MessageQueue`` (hashable; ordered like Java's ``compareTo``: topic, broker, queue)."""

    topic: str
    broker_name: str
    queue_id: int

    @classmethod
    def from_json(cls, obj: Any, where: str = "messageQueue") -> MessageQueue:
        obj = _object(obj, where)
        return cls(
            _str(obj, "topic", where, required=True),  # type: ignore[arg-type]
            _str(obj, "brokerName", where, required=True),  # type: ignore[arg-type]
            _int_field(obj, "queueId", where, required=True),
        )

    def to_json(self) -> Bean:
        return Bean(brokerName=self.broker_name, queueId=self.queue_id, topic=self.topic)

    def java_hash(self) -> int:
        """``MessageQueue.hashCode()`` (unsigned 32-bit): its place as a ``HashMap`` key."""
        h = 31 + java_string_hash(self.broker_name)
        h = 31 * h + self.queue_id
        return (31 * h + java_string_hash(self.topic)) & 0xFFFFFFFF

    @classmethod
    def from_key(cls, key: Any, where: str = "messageQueue") -> MessageQueue:
        """A ``MessageQueue`` written as a map key (fastjson's object key)."""
        return cls.from_json(key.as_dict() if hasattr(key, "as_dict") else key, where)


def _mq_list(obj: dict, name: str) -> list[MessageQueue]:
    out: list[MessageQueue] = []
    seen: set[MessageQueue] = set()
    for i, item in enumerate(_list(obj, name, "")):
        mq = MessageQueue.from_json(item, f"{name}[{i}]")
        if mq not in seen:  # a Java Set
            seen.add(mq)
            out.append(mq)
    return out


@attrs.define(slots=True)
class LockBatchRequestBody:
    """``LockBatchRequestBody`` (LOCK_BATCH_MQ 41): ``{"clientId","consumerGroup","mqSet"}``.

    ``only_this_broker`` is a 5.x field, read when present and written only when set.
    """

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueue] = attrs.field(factory=list)
    only_this_broker: bool = False

    _what = "lock batch request"

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview | str | None):
        obj = _load_object(body, cls._what)
        return cls(
            consumer_group=_str(obj, "consumerGroup", "", required=True),  # type: ignore[arg-type]
            client_id=_str(obj, "clientId", "", required=True),  # type: ignore[arg-type]
            mq_set=_mq_list(obj, "mqSet"),
            only_this_broker=_bool(obj, "onlyThisBroker", ""),
        )

    def to_json(self) -> Bean:
        return Bean(
            clientId=self.client_id,
            consumerGroup=self.consumer_group,
            mqSet=[mq.to_json() for mq in self.mq_set],
            onlyThisBroker=True if self.only_this_broker else None,
        )

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())


@attrs.define(slots=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """``UnlockBatchRequestBody`` (UNLOCK_BATCH_MQ 42): the same fields as the lock request."""

    _what = "unlock batch request"


@attrs.define(slots=True)
class LockBatchResponseBody:
    """``LockBatchResponseBody``: ``{"lockOKMQSet":[{brokerName,queueId,topic}...]}``."""

    lock_ok_mq_set: list[MessageQueue] = attrs.field(factory=list)

    def to_json(self) -> Bean:
        return Bean(lockOKMQSet=[mq.to_json() for mq in self.lock_ok_mq_set])

    def encode(self) -> bytes:
        return dumps_bytes(self.to_json())

    @classmethod
    def decode(cls, body: bytes | bytearray | memoryview | str | None) -> LockBatchResponseBody:
        return cls(_mq_list(_load_object(body, "lock batch response"), "lockOKMQSet"))


def message_queues(items: Iterable[tuple[str, str, int]]) -> list[MessageQueue]:
    """Convenience: ``[(topic, broker, queue_id)...]`` -> ``[MessageQueue...]``."""
    return [MessageQueue(t, b, q) for t, b, q in items]
