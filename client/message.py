"""Messages as the client sees them (Java: ``Message``, ``MessageExt``, ``MessageQueue``,
``SendResult`` / ``SendStatus``, ``PullResult`` / ``PullStatus``).

``Message``, ``MessageExt`` and ``MessageQueue`` are the codecs' own classes (one
definition of the properties, record and message-id formats): this module re-exports them
and adds :func:`new_message`, a keyword builder, and the result types of sends and pulls.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.message import Message, MessageExt

__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "new_message",
    "SendStatus",
    "SendResult",
    "PullStatus",
    "PullResult",
]


def new_message(
    topic: str,
    body: bytes | str,
    *,
    tags: str | None = None,
    keys: str | Iterable[str] | None = None,
    properties: Mapping[str, str] | None = None,
    delay_level: int = 0,
    flag: int = 0,
    wait_store_msg_ok: bool = True,
) -> Message:
    """A message as Java's ``new Message(topic, tags, keys, body)`` builds it, plus user
    properties (``putUserProperty``: system names refused with ``ValueError``) and a delay
    level (1..18 with the default ``messageDelayLevel``; 0 = none). A ``str`` body is UTF-8."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    msg = Message.create(topic, body, tags=tags, keys=keys, flag=flag, wait_store_msg_ok=wait_store_msg_ok)
    if delay_level:
        if delay_level < 0:
            raise ValueError(f"delay level must be >= 0, got {delay_level}")
        msg.delay_time_level = delay_level
    for name, value in (properties or {}).items():
        msg.put_user_property(name, value)
    return msg


class SendStatus(enum.Enum):
    """``SendStatus``: SEND_OK, or stored but not yet as safe as asked."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@attrs.define(slots=True)
class SendResult:
    """``SendResult``: ``msg_id`` is the client's unique key (comma-joined for a batch),
    ``offset_msg_id`` the broker's offset id (store host + commit-log offset).

    Not frozen (Java's is a mutable bean too): a frozen attrs class sets each field
    through ``object.__setattr__``, which made a result cost about four times as much to
    build, once per send."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK


class PullStatus(enum.Enum):
    """``PullStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@attrs.define(slots=True)
class PullResult:
    """``PullResultExt``: messages decoded from the body (not yet filtered by tag: the
    consumer does that, as Java's ``PullAPIWrapper.processPullResult``)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = attrs.field(factory=list)
    suggest_which_broker_id: int = 0
