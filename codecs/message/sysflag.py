"""``MessageSysFlag`` of RocketMQ 4.9.8: the SYSFLAG bits of send headers and records;
and ``TopicSysFlag``, the two bits of a topic config's ``topicSysFlag``.

Bits 2-3 hold the transaction type (a 2-bit value, not two flags). 5.x adds bits 6-10
(``NEED_UNWRAP``, ``INNER_BATCH``, compression type); 4.9.8 has none of them and always
compresses with zlib.
"""

from __future__ import annotations

from .hosts import is_ipv6

__all__ = [
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "MULTI_TAGS_FLAG",
    "STOREHOSTADDRESS_V6_FLAG",
    "TOPIC_FLAG_UNIT",
    "TOPIC_FLAG_UNIT_SUB",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "clear_compressed_flag",
    "get_transaction_value",
    "is_compressed",
    "reset_transaction_value",
    "with_host_flags",
]

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5

#: ``TopicSysFlag.FLAG_UNIT``: a unit topic.
TOPIC_FLAG_UNIT = 0x1
#: ``TopicSysFlag.FLAG_UNIT_SUB``: a topic a unit-mode group subscribes (its retry topic).
TOPIC_FLAG_UNIT_SUB = 0x1 << 1


def get_transaction_value(flag: int) -> int:
    """The transaction type bits (one of the ``TRANSACTION_*_TYPE`` values)."""
    return flag & TRANSACTION_ROLLBACK_TYPE


def reset_transaction_value(flag: int, tx_type: int) -> int:
    """``flag`` with its transaction type replaced by ``tx_type``."""
    return (flag & ~TRANSACTION_ROLLBACK_TYPE) | tx_type


def clear_compressed_flag(flag: int) -> int:
    """``flag`` without :data:`COMPRESSED_FLAG`."""
    return flag & ~COMPRESSED_FLAG


def is_compressed(flag: int) -> bool:
    """Whether the body is zlib-compressed."""
    return bool(flag & COMPRESSED_FLAG)


def with_host_flags(flag: int, born_ip: str, store_ip: str) -> int:
    """``flag`` with the two IPv6 host bits set from the addresses, as a Java broker sets them.

    The Java broker sets ``BORNHOST_V6_FLAG`` when the producer's address is an
    ``Inet6Address`` and ``STOREHOSTADDRESS_V6_FLAG`` when its own is; the record layout
    (8- or 20-byte host fields) follows these bits. IPv4-mapped IPv6 counts as IPv4, as in
    Java. Not an IP -> :class:`MessageEncodeError`.
    """
    flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if is_ipv6(born_ip):
        flag |= BORNHOST_V6_FLAG
    if is_ipv6(store_ip):
        flag |= STOREHOSTADDRESS_V6_FLAG
    return flag
