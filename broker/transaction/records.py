"""The records of a transaction: half message, op record, committed message, check copy.

RocketMQ 4.9.8's ``TransactionalMessageBridge`` (``parseHalfMessageInner``,
``renewHalfMessageInner``, ``renewImmunityHalfMessageInner``, ``makeOpMessageInner``),
``EndTransactionProcessor.endMessageTransaction``,
``DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner`` and
``TransactionalMessageUtil``, as functions from what is stored to what to store next.
Properties are written as Java's broker writes them, in ``HashMap`` order
(:class:`~trocket.codecs.java_hashmap.JavaHashMap`: the half message and the check
copies put their items in the message's map); the committed message's are the half
message's string with items cut (:func:`~trocket.codecs.message.properties.without_properties_bytes`:
on a string in HashMap order, the order Java writes that map without them):

* half message (:func:`half_message`): the prepared send, moved to
  ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC``/``REAL_QID`` naming where it
  was sent, its transaction type reset to "not transactional" so the half topic's
  consume queue indexes it (a prepared record would get none);
* op record (:func:`op_message`): on ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the half queue
  id, tags ``d`` (``REMOVETAG``), the body the half message's queue offset in decimal:
  "this half message is ended" (a commit or a rollback alike); properties ``TAGS`` and
  ``WAIT`` (Java gives it a unique id after writing its properties string: none stored);
* committed message (:func:`committed_message`): the half message back on its real topic
  and queue, transaction type COMMIT, ``PREPAREDTRANSACTIONOFFSET`` the half record's
  commit-log offset;
* check copy (:func:`check_copy`): before each check the half message is stored again
  at the head of the half queue with ``TRANSACTION_CHECK_TIMES`` counted up (Java's
  ``putBackHalfMsgQueue``), so the check offset can move on;
* discarded message (:func:`discarded_message`): after ``transactionCheckMax`` checks,
  the half message on ``TRANS_CHECK_MAX_TIME_TOPIC``.

Differences from 4.9.8, on purpose: the committed message's stored properties lose
``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG`` (4.9.8 clears them from its map *after*
building the stored string, so its consumers see all three -- the same slip as the
delay's, apache/rocketmq#11037; with ``TRAN_MSG=true`` kept, a consumer that forwards
the message through a producer sends a new half message); every check copy carries
``TRAN_PREPARED_QUEUE_OFFSET`` naming the first half message of its transaction (Java
writes it only on the immunity copies; here the check service finds a transaction's
live copy by it, so a transaction ends once however many copies the checks made), and
the committed message drops it again; and a check copy keeps the message's flag and
reconsume times (Java's ``renewHalfMessageInner`` drops both, so a checked transaction
is delivered with flag 0).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from functools import lru_cache

from trocket.codecs.errors import MessageDecodeError
from trocket.codecs.java_hashmap import JavaHashMap, hashmap_capacity, hashmap_properties
from trocket.codecs.message.hosts import HostAddress, bytes_to_ip
from trocket.codecs.message.message import MessageExt
from trocket.codecs.message.properties import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_WAIT_STORE_MSG_OK,
    decode_properties,
    without_properties_bytes,
)
from trocket.codecs.message.record import RecordHead, decode_record, dispatch_fields, record_head
from trocket.codecs.message.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from trocket.codecs.names import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)

from ..store import MessageInner, MessageStore, tags_hash
from ..store.messages import message_inner, properties_map

__all__ = [
    "CHECK_MAX_TIME_TOPIC",
    "HALF_QUEUE_ID",
    "HALF_TOPIC",
    "OP_TOPIC",
    "REMOVE_TAG",
    "TRANS_GROUP",
    "MessageFields",
    "PreparedHalf",
    "StoredMessage",
    "check_copy",
    "committed_fields",
    "committed_message",
    "discarded_message",
    "half_message",
    "op_fields",
    "origin_offset",
    "read_stored",
]

HALF_TOPIC = RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC = RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC = RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
#: the half queue every prepared message goes to (``parseHalfMessageInner``: 0)
HALF_QUEUE_ID = 0
#: ``TransactionalMessageUtil.REMOVETAG``: the op record's tags
REMOVE_TAG = "d"
#: ``MixAll.CID_SYS_RMQ_TRANS``: the group whose consumer offsets are the check's progress
TRANS_GROUP = "CID_RMQ_SYS_TRANS"

#: what the committed message's properties lose (see the module docstring)
_NOT_ON_COMMIT = frozenset(
    k.encode()
    for k in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
              PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
)
_REMOVE_TAG_CODE = tags_hash(REMOVE_TAG)
#: an op record's properties: ``new Message(opTopic, "d", body)``'s TAGS and WAIT, written
#: by ``makeOpMessageInner`` before it sets the unique id (so the id is not stored)
_OP_PROPS = JavaHashMap(((PROPERTY_TAGS, REMOVE_TAG), (PROPERTY_WAIT_STORE_MSG_OK, "true"))).to_properties().encode()


def half_message(msg: MessageInner, items: dict[str, str] | None = None) -> MessageInner:
    """``parseHalfMessageInner``: ``msg`` as the half topic stores it (a new message;
    ``msg`` is left as the producer addressed it): ``REAL_TOPIC`` and ``REAL_QID`` put in
    its properties map, written in Java's order; the map is the half message's
    ``properties``. ``items``: that map as a dict in insertion order, no key removed
    for good (a send's, :func:`~trocket.broker.pre_put.sent_items`: put into and kept,
    no :class:`JavaHashMap` made); else ``msg``'s map, copied. ``UnicodeDecodeError``
    for properties that are not UTF-8."""
    topic = msg.topic
    props: Mapping[str, str]
    if items is None:
        props = m = properties_map(msg).copy()
        m[PROPERTY_REAL_TOPIC] = topic
        m[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        text = m.to_properties()
    else:
        props = items
        items[PROPERTY_REAL_TOPIC] = topic
        items[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        n = len(items)  # (the capacity of a HashMap of n puts: hashmap_capacity, inline up to 12)
        text = hashmap_properties(items, 16 if n <= 12 else hashmap_capacity(n))
    tags_code = msg.tags_code
    half = message_inner(  # (slot stores: the prepared send's path)
        HALF_TOPIC, msg.body, HALF_QUEUE_ID, msg.flag, text.encode("utf-8"),
        msg.sys_flag & ~TRANSACTION_ROLLBACK_TYPE, msg.born_timestamp, msg.born_host, msg.reconsume_times,
        msg.tag_hash() if tags_code is None else tags_code,
    )
    half.properties = props
    return half


class StoredMessage:
    """A record read back (a half message, here): its fixed fields (``head``), topic and
    properties (decoded, and as stored: ``raw_properties``) at once; the whole message
    (``msg``: body as stored, compressed or not) decoded when first asked for. Reading
    only this much is what END_TRANSACTION needs (measured: a third of a full decode)."""

    __slots__ = ("record", "head", "topic", "properties", "raw_properties", "_msg")

    def __init__(self, record: bytes, head: RecordHead, topic: str, properties: str) -> None:
        self.record = record
        self.head = head
        self.topic = topic
        self.properties = decode_properties(properties)
        if not properties:
            self.raw_properties = b""
        else:  # (an ASCII string's length is its UTF-8 length: no encode to count it)
            size = len(properties) if properties.isascii() else len(properties.encode())
            self.raw_properties = record[len(record) - size :]
        self._msg: MessageExt | None = None

    @property
    def msg(self) -> MessageExt:
        if self._msg is None:
            self._msg = decode_record(self.record, decompress=False)[0]
        return self._msg

    @property
    def queue_offset(self) -> int:
        return self.head.queue_offset

    @property
    def commit_log_offset(self) -> int:
        return self.head.physical_offset

    @property
    def body(self) -> bytes:
        head = self.head
        return self.record[head.body_position : head.body_position + head.body_length]

    @property
    def born_host(self) -> HostAddress:
        return _host(self.head.born_ip, self.head.born_port)

    @property
    def producer_group(self) -> str | None:
        return self.properties.get(PROPERTY_PRODUCER_GROUP)

    @property
    def real_topic(self) -> str | None:
        return self.properties.get(PROPERTY_REAL_TOPIC)

    @property
    def real_queue_id(self) -> int | None:
        try:
            return int(self.properties.get(PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            return None

    @property
    def check_times(self) -> int | None:
        """``TRANSACTION_CHECK_TIMES``; None when never checked (-1 when unreadable,
        as Java's ``getInt``)."""
        text = self.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            return -1


class PreparedHalf:
    """A half message as its prepared send stored it, kept (by the service, for a
    while) so that a prompt END_TRANSACTION needs no read of it: the half record's
    message (``half``: its properties bytes, body, flags, born time and host, tags
    code, as stored), its properties map (``properties``: the stored ones, as a record
    read back has them), where it was sent (``real_topic``/``real_queue_id``) and where
    it went (``queue_offset``; the commit-log offset is the key it is kept under).
    ``size``: the bytes it holds (body and properties). Made by
    :meth:`~trocket.broker.transaction.TransactionalMessageService.prepared`."""

    __slots__ = ("half", "properties", "real_topic", "real_queue_id", "queue_offset", "size")

    half: MessageInner
    properties: Mapping[str, str]
    real_topic: str
    real_queue_id: int
    queue_offset: int
    size: int


@lru_cache(maxsize=1024)
def _host(ip: bytes, port: int) -> HostAddress:
    """A record's BORNHOST fields as a :class:`HostAddress` (a broker's producers come
    from few hosts: cached)."""
    return HostAddress(bytes_to_ip(ip), port)


def read_stored(store: MessageStore, commit_log_offset: int) -> StoredMessage | None:
    """The record starting at ``commit_log_offset`` (``lookMessageByOffset`` without
    inflating the body), or None when no record starts there or it does not decode."""
    if commit_log_offset < 0:
        return None
    view = store.select_one_message_by_offset(commit_log_offset)
    if view is None:
        return None
    record = bytes(view)  # (a copy: no view of a segment outlives the call)
    try:
        _, topic, _, _, _, _, _, properties = dispatch_fields(record)
        head = record_head(record)
    except (MessageDecodeError, struct.error):
        return None
    return StoredMessage(record, head, topic, properties)


def origin_offset(half: StoredMessage | PreparedHalf, queue_offset: int) -> int:
    """The queue offset of the transaction's first half message: a check copy names it
    (``TRAN_PREPARED_QUEUE_OFFSET``), the first one is itself."""
    text = half.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
    if text is None:
        return queue_offset
    try:
        return int(text)
    except ValueError:
        return queue_offset


#: a message's fields as :func:`~trocket.broker.store.messages.message_inner` takes
#: them, then its prepared transaction offset (``MessageStore.append_fields``'s arguments)
MessageFields = tuple[str, bytes, int, int, bytes, int, int, HostAddress, int, int, int]


def committed_fields(half: StoredMessage | PreparedHalf, commit_log_offset: int) -> MessageFields:
    """``endMessageTransaction``: the half message on its real topic and queue, as a
    committed transactional message (see the module docstring for its properties);
    the same record whether the half message was read back or kept (:class:`PreparedHalf`).
    As fields: END_TRANSACTION's path stores them without a message object."""
    if type(half) is PreparedHalf:
        stored = half.half
        return (
            half.real_topic, stored.body, half.real_queue_id, stored.flag,
            without_properties_bytes(stored.properties_bytes, _NOT_ON_COMMIT),
            (stored.sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | TRANSACTION_COMMIT_TYPE, stored.born_timestamp,
            stored.born_host, stored.reconsume_times, stored.tags_code, commit_log_offset,
        )
    head = half.head
    return (
        half.real_topic or "", half.body, half.real_queue_id or 0, head.flag,
        without_properties_bytes(half.raw_properties, _NOT_ON_COMMIT),
        (head.sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | TRANSACTION_COMMIT_TYPE, head.born_timestamp,
        half.born_host, head.reconsume_times, tags_hash(half.properties.get(PROPERTY_TAGS)), commit_log_offset,
    )


def committed_message(half: StoredMessage | PreparedHalf, commit_log_offset: int) -> MessageInner:
    """:func:`committed_fields` as a message (one with a delay level: the schedule
    service rewrites it)."""
    msg = message_inner(*committed_fields(half, commit_log_offset)[:10])
    msg.prepared_transaction_offset = commit_log_offset
    return msg


def op_fields(half_queue_offset: int, store_host: HostAddress, now_ms: int) -> MessageFields:
    """``addRemoveTagInTransactionOp``: the op record that ends the half message at
    ``half_queue_offset`` (as fields: :data:`MessageFields`)."""
    return (
        OP_TOPIC, b"%d" % half_queue_offset, HALF_QUEUE_ID, 0, _OP_PROPS, 0, now_ms, store_host, 0, _REMOVE_TAG_CODE,
        0,
    )


def check_copy(half: StoredMessage, origin: int | None, check_times: int | None) -> MessageInner:
    """``renewHalfMessageInner`` (``check_times``: the count it carries, Java's
    ``needDiscard`` having counted it up) or ``renewImmunityHalfMessageInner``
    (``check_times`` None: the count as it was): the half message again, naming the
    transaction's first half message ``origin`` (None: a new transaction, the copy
    its own first). Also RESUME_CHECK_HALF_MESSAGE's copy (``check_times`` 0, from
    any stored message: ``toMessageExtBrokerInner``)."""
    msg = half.msg
    props = JavaHashMap.from_properties(half.raw_properties.decode("utf-8", "replace"))
    if check_times is not None:
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
    if origin is not None:
        props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(origin)
    return MessageInner(
        topic=HALF_TOPIC,
        body=msg.body,
        queue_id=HALF_QUEUE_ID,
        flag=msg.flag,
        properties_bytes=props.to_properties().encode("utf-8"),
        properties=props,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
        tags_code=tags_hash(msg.properties.get(PROPERTY_TAGS)),
    )


def discarded_message(half: StoredMessage, queue_id: int = 0) -> MessageInner:
    """``toMessageExtBrokerInner``: the half message, checked too often, on
    ``TRANS_CHECK_MAX_TIME_TOPIC`` (properties as stored)."""
    msg = half.msg
    return MessageInner(
        topic=CHECK_MAX_TIME_TOPIC,
        body=msg.body,
        queue_id=queue_id,
        flag=msg.flag,
        properties_bytes=half.raw_properties,
        properties=dict(msg.properties),
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
        tags_code=tags_hash(msg.properties.get(PROPERTY_TAGS)),
    )
