"""Message property names and the ``k\\x01v\\x02...`` properties string.

Names are ``MessageConst`` of RocketMQ 4.9.8 under their Java names
(``PROPERTY_WAIT_STORE_MSG_OK = "WAIT"``), so they grep against the Java sources.

Encoding follows 4.9.8's ``MessageDecoder.messageProperties2String``: ``name \\x01 value``
pairs joined by ``\\x02``, entries with a ``None`` value skipped, and **no trailing
separator** (4.9.8 deletes the last ``\\x02``; older and 5.x lines keep it, and the C++
client writes one). Java writes the pairs in ``HashMap`` iteration order; pass
``java_order=True`` to get the same bytes from a dict in insertion order (what a Java
broker does when it re-serialises, e.g. after adding ``CLUSTER``). Neither Java nor this
module checks that names and values are free of ``\\x01``/``\\x02``.

Decoding follows 4.9.8's ``string2messageProperties`` (the ``indexOf`` version): items
are split on ``\\x02``, the key runs to the item's first ``\\x01`` and the value is the
rest (it may hold more ``\\x01``). Items with no ``\\x01``, an empty key or an empty value
are skipped silently, a repeated key keeps its last value, and a trailing ``\\x02`` is
harmless. Java never fails on any string, so :func:`decode_properties` never raises
either; only the bytes variant can, on invalid UTF-8 (Java would substitute U+FFFD; we
reject the bytes with :class:`MessageDecodeError` rather than alter them).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..errors import MessageDecodeError
from ..java_hashmap import JavaHashMap, decode_properties, hashmap_order, java_string_hash
from ..errors import MessageEncodeError

__all__ = [
    "KEY_SEPARATOR",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "SYSTEM_PROPERTY_NAMES",
    "MAX_PROPERTIES_LENGTH",
    "append_properties",
    "decode_properties",
    "decode_properties_bytes",
    "encode_properties",
    "encode_properties_bytes",
    "get_property",
    "send_properties",
    "tags_code",
    "without_properties_bytes",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
#: Separator of the keys inside the ``KEYS`` property.
KEY_SEPARATOR = " "
#: Properties are written with an ``i16`` length prefix (records and batch bodies).
MAX_PROPERTIES_LENGTH = 0x7FFF

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_BUYER_ID = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INSTANCE_ID = "INSTANCE_ID"
PROPERTY_CORRELATION_ID = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
# Light message queues (4.9.3+).
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"

#: ``MessageConst.STRING_HASH_SET``: names ``Message.putUserProperty`` refuses.
SYSTEM_PROPERTY_NAMES: frozenset[str] = frozenset(
    {
        PROPERTY_TRACE_SWITCH,
        PROPERTY_MSG_REGION,
        PROPERTY_KEYS,
        PROPERTY_TAGS,
        PROPERTY_WAIT_STORE_MSG_OK,
        PROPERTY_DELAY_TIME_LEVEL,
        PROPERTY_RETRY_TOPIC,
        PROPERTY_REAL_TOPIC,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_TRANSACTION_PREPARED,
        PROPERTY_PRODUCER_GROUP,
        PROPERTY_MIN_OFFSET,
        PROPERTY_MAX_OFFSET,
        PROPERTY_BUYER_ID,
        PROPERTY_ORIGIN_MESSAGE_ID,
        PROPERTY_TRANSFER_FLAG,
        PROPERTY_CORRECTION_FLAG,
        PROPERTY_MQ2_FLAG,
        PROPERTY_RECONSUME_TIME,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_MAX_RECONSUME_TIMES,
        PROPERTY_CONSUME_START_TIMESTAMP,
        PROPERTY_INSTANCE_ID,
        PROPERTY_CORRELATION_ID,
        PROPERTY_MESSAGE_REPLY_TO_CLIENT,
        PROPERTY_MESSAGE_TTL,
        PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
        PROPERTY_PUSH_REPLY_TIME,
        PROPERTY_CLUSTER,
        PROPERTY_MESSAGE_TYPE,
        PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    }
)

__all__ += [n for n in list(globals()) if n.startswith("PROPERTY_") and n not in __all__]


def encode_properties(properties: Mapping[str, str | None], *, java_order: bool = False) -> str:
    """The properties string as 4.9.8 writes it: ``k\\x01v`` joined by ``\\x02``, none trailing.

    ``java_order`` writes the pairs in ``java.util.HashMap`` iteration order (given the
    mapping's insertion order); otherwise in the mapping's own order.
    """
    if not properties:
        return ""
    keys = hashmap_order(properties) if java_order else properties
    return PROPERTY_SEPARATOR.join(
        [f"{k}{NAME_VALUE_SEPARATOR}{v}" for k in keys if (v := properties[k]) is not None]
    )


def encode_properties_bytes(
    properties: Mapping[str, str | None], *, java_order: bool = False
) -> bytes:
    """:func:`encode_properties` as UTF-8; at most 32767 bytes (an ``i16`` length prefix)."""
    data = utf8(encode_properties(properties, java_order=java_order), "properties")
    if len(data) > MAX_PROPERTIES_LENGTH:
        raise MessageEncodeError(
            f"properties are {len(data)} bytes, more than the maximum {MAX_PROPERTIES_LENGTH}"
        )
    return data


def get_property(props: str | bytes | bytearray | memoryview | None, key: str) -> str | None:
    """The value of ``key`` in a properties string (or its UTF-8 bytes) without parsing
    the rest, as :func:`decode_properties` (Java's ``string2messageProperties``) would
    map it: the last item naming ``key`` with a non-empty value; ``None`` when there is
    none; undecodable bytes replaced. For hot paths that need one property (TAGS, WAIT,
    DELAY): the put path, recovery and a replicating slave read TAGS this way alike."""
    if not props:
        return None
    if isinstance(props, str):
        needle, sep = key + NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    else:
        props = bytes(props)
        needle, sep = key.encode("utf-8") + b"\x01", b"\x02"
    at = len(props)
    while True:
        i = props.rfind(needle, 0, at)
        if i < 0:
            return None
        if i == 0 or props[i - 1 : i] == sep:
            start = i + len(needle)
            end = props.find(sep, start)
            value = props[start:] if end < 0 else props[start:end]
            if value:
                if not isinstance(value, str):
                    value = value.decode("utf-8", "replace")
                return value
        at = i + len(needle) - 1  # the items before this one


def decode_properties_bytes(data: bytes | bytearray | memoryview) -> dict[str, str]:
    """:func:`decode_properties` over UTF-8 bytes; invalid UTF-8 -> :class:`MessageDecodeError`."""
    if not data:
        return {}
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"properties are not valid UTF-8: {exc.reason}") from None
    return decode_properties(text)


def append_properties(base: bytes, extra: bytes) -> bytes:
    """``base`` then ``extra``, with a ``\\x02`` between unless ``base`` is empty or ends in one.

    This is how 4.9.8's ``CommitLog.MessageExtEncoder`` appends a batch's own properties
    to each inner message's (``needAppendLastPropertySeparator``); needed because 4.9.8
    writes property strings without the trailing separator.
    """
    if not extra:
        return base
    if base and base[-1] != 0x02:
        return b"".join((base, b"\x02", extra))
    return base + extra


def send_properties(props: str, cluster: str) -> tuple[bytes, int, str | None]:
    """What 4.9.8's ``SendMessageProcessor`` stores for a single message's properties
    string, as UTF-8, with what the send path reads of it: the client's string parsed
    (``string2messageProperties``), ``CLUSTER=<cluster>`` put, ``WAIT`` removed (4.9.1+:
    nine bytes a message), written back in ``HashMap`` order
    (``messageProperties2String``, no trailing separator); the consume queue's tags code
    of its ``TAGS`` (:func:`tags_code`); and the ``WAIT`` value removed (``None``: none),
    which says whether the producer waits for the store. A string that is not UTF-8
    (lone surrogates): :class:`MessageEncodeError`."""
    m = JavaHashMap.from_properties(props)
    m[PROPERTY_CLUSTER] = cluster
    wait = m.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
    return utf8(m.to_properties(), "properties"), tags_code(m.get(PROPERTY_TAGS)), wait


def tags_code(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: Java's ``String.hashCode`` of a
    ``TAGS`` value as a signed int (the consume queue's tags code); 0 for none."""
    if not tags:
        return 0
    h = java_string_hash(tags)
    return h - (1 << 32) if h & 0x80000000 else h


def without_properties_bytes(data: bytes, drop: Collection[bytes]) -> bytes:
    """``data`` (a properties string as bytes) without the items whose key is in
    ``drop``; every other byte (order, separators, a trailing one) as it was. On a
    string Java wrote (``HashMap`` order) that is Java's order of the map without those
    keys; it reads no UTF-8, so it also serves a string that is not."""
    parts = data.split(b"\x02")
    trailing = parts[-1] == b""
    if trailing:
        parts.pop()
    kept = [part for part in parts if part.partition(b"\x01")[0] not in drop]
    if len(kept) == len(parts):
        return data
    if trailing:
        kept.append(b"")
    return b"\x02".join(kept)


def utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8, or :class:`MessageEncodeError` (lone surrogates) naming ``what``."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MessageEncodeError(f"{what} cannot be encoded as UTF-8: {exc.reason}") from None


# The compiled twin when built (codecs/accel.py); the function above stays the reference.
from ..accel import accelerated  # noqa: E402

get_property = accelerated(get_property)
send_properties = accelerated(send_properties)
without_properties_bytes = accelerated(without_properties_bytes)
