"""What the broker hands the store: ``MessageExtBrokerInner`` and ``MessageExtBatch``.

Properties may come as the dict the broker parsed and/or the raw bytes the producer
sent: raw bytes are stored verbatim (as Java stores ``propertiesString``); without them
the dict is encoded. The dict is always where TAGS (the consume-queue tag hash) and
WAIT are read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import attrs

from trocket.codecs.java_hashmap import JavaHashMap
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.properties import PROPERTY_TAGS, tags_code

__all__ = ["BatchInner", "MessageInner", "message_inner", "properties_map", "schedule_delay_ms", "tags_hash"]

_NO_HOST = HostAddress("0.0.0.0", 0)


#: ``MessageExtBrokerInner.tagsString2tagsCode`` (:func:`~trocket.codecs.message.properties.tags_code`:
#: Java's ``String.hashCode`` of TAGS, signed; 0 if none), cached: brokers see few distinct tags
tags_hash = lru_cache(maxsize=4096)(tags_code)


def schedule_delay_ms(delays_ms: tuple[int, ...], level: str | int | None) -> int | None:
    """The delay of a ``SCHEDULE_TOPIC_XXXX`` record's ``DELAY`` level: 4.9.8's
    ``checkMessageAndReturnSize`` clamps the level to the last one and, when it is above
    0, makes the tags code ``computeDeliverTimestamp(level, storeTimestamp)`` = store
    time + this. None (keep the TAGS hash) for no level, a level <= 0 or no table."""
    if level is None:
        return None
    try:
        n = int(level)
    except ValueError:
        return None
    n = min(n, len(delays_ms))
    return delays_ms[n - 1] if n > 0 else None


@attrs.define(slots=True, kw_only=True)
class MessageInner:
    """One message to store; the broker fills what the send header carried.

    ``properties_bytes`` (if given) is written verbatim; otherwise ``properties`` is
    encoded. ``properties`` is read for TAGS (the consume-queue tag hash) unless
    ``tags_code`` is given.
    """

    topic: str
    body: bytes | bytearray | memoryview = b""
    queue_id: int = 0
    flag: int = 0
    properties: Mapping[str, str] = attrs.field(factory=dict)
    properties_bytes: bytes | bytearray | memoryview | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = _NO_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None

    def tag_hash(self) -> int:
        if self.tags_code is not None:
            return self.tags_code
        return tags_hash(self.properties.get(PROPERTY_TAGS))


@attrs.define(slots=True, kw_only=True)
class BatchInner:
    """A batch body (``MessageDecoder.encodeMessages`` entries) for one topic and queue.

    ``properties_bytes`` are the batch-level properties (the send header's, plus what
    the broker adds): 4.9.8 appends them to every entry's own properties, with a
    ``\\x02`` between when the entry's do not end with one.
    """

    topic: str
    body: bytes | bytearray | memoryview
    queue_id: int = 0
    properties_bytes: bytes | bytearray | memoryview = b""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = _NO_HOST
    reconsume_times: int = 0


def properties_map(msg: MessageInner) -> JavaHashMap:
    """``msg``'s properties as the ``HashMap`` Java's broker rewrites them in: the send
    processor's map when it made one (:func:`~trocket.broker.pre_put.pre_put_map`:
    ``CLUSTER`` put, ``WAIT`` back at its bucket's tail), else the mapping given as such
    (its insertion order), else the stored string parsed. The map itself when it is one:
    copy it before changing it. ``UnicodeDecodeError`` for properties that are not UTF-8."""
    props = msg.properties
    if isinstance(props, JavaHashMap):
        return props
    raw = msg.properties_bytes
    if raw is None or props:
        return JavaHashMap(props.items())
    return JavaHashMap.from_properties(str(raw, "utf-8"))


_new = object.__new__


def message_inner(
    topic: str,
    body: bytes | bytearray | memoryview,
    queue_id: int,
    flag: int,
    properties_bytes: bytes,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    reconsume_times: int,
    tags_code: int,
) -> MessageInner:
    """A :class:`MessageInner` from a send (properties as bytes, the tags code known),
    built with slot stores: the keyword ``__init__`` costs about four times as much, on
    every send. Valid while the class has no validators or converters (as
    ``codecs/headers/fast.py``)."""
    m = _new(MessageInner)
    m.topic = topic
    m.body = body
    m.queue_id = queue_id
    m.flag = flag
    m.properties = {}
    m.properties_bytes = properties_bytes
    m.sys_flag = sys_flag
    m.born_timestamp = born_timestamp
    m.born_host = born_host
    m.reconsume_times = reconsume_times
    m.prepared_transaction_offset = 0
    m.tags_code = tags_code
    return m
