"""Request processors of the broker, one module per family.

One style throughout: a processor is an object (one per broker) whose
``process_request(conn, request)`` remoting calls (RocketMQ's ``NettyRequestProcessor``),
built from the typed :class:`~trocket.broker.context.BrokerContext`; every module's
``register(ctx)`` registers it on ``ctx.server`` for its codes and returns it. The
controller calls them all.

Errors: a processor refuses a request by raising one of :mod:`trocket.broker.errors`
(each knows Java's code; its message is Java's remark) -- a malformed custom header is
a :class:`~trocket.broker.errors.HeaderError` from :func:`decode_request_header` -- and
remoting answers it (with an ``extFields`` object: the broker's server config sets
``system_reply_ext_fields``). Anything else a processor raises is answered by the
remoting endpoint too: SYSTEM_ERROR with RocketMQ's ``exceptionSimpleDesc`` remark
(``Type: message, where``; what a Java broker's ``NettyRemotingAbstract`` answers),
logged, the connection kept.

This package holds what processors share: responses that always
carry an ``extFields`` object (the C++ client crashes on a send or pull response
without one), RocketMQ's remark helpers, header decoding and the peer address as a
``HostAddress``.

Modules here (owner in parentheses):

- :mod:`.send` SEND_MESSAGE 10, SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320
- :mod:`.pull` PULL_MESSAGE 11 (with :mod:`trocket.broker.long_polling`)
- :mod:`.admin` UPDATE_AND_CREATE_TOPIC 17, GET_BROKER_RUNTIME_INFO 28,
  SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
  VIEW_MESSAGE_BY_ID 33, DELETE_TOPIC_IN_BROKER 215, GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305,
  CLEAN_UNUSED_TOPIC 316, CLEAN_EXPIRED_CONSUMEQUEUE 306, DELETE_EXPIRED_COMMITLOG 329,
  RESUME_CHECK_HALF_MESSAGE 323
- :mod:`.groups` the consumer-group codes (200, 201, 207, 203, 204, 300, 314, 222, 307,
  309), GET_ALL_PRODUCER_INFO 328, INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223,
  QUERY_CORRECTION_OFFSET 308
- :mod:`.client`, :mod:`.offsets`, :mod:`.locks`, :mod:`.send_back` (the client
  processors: 34, 35, 38, 14, 15, 41, 42, 36)
- :mod:`.stats` VIEW_BROKER_STATS_DATA 315, GET_BROKER_CONSUME_STATS 317,
  GET_CONSUME_STATS 208, GET_TOPIC_STATS_INFO 202, QUERY_CONSUME_TIME_SPAN 303
- :mod:`.query` QUERY_MESSAGE 12, QUERY_CONSUME_QUEUE 321, GET_EARLIEST_MSG_STORETIME 32
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

from trocket.codecs.codes import ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header, encode_header
from trocket.codecs.errors import CustomHeaderError
from trocket.codecs.message.hosts import HostAddress

from ..errors import HeaderError
from ..store import TopicConfig

__all__ = [
    "APPLY_TOPIC_URL",
    "SUBSCRIPTION_GROUP_NOT_EXIST_URL",
    "decode_request_header",
    "host_address",
    "perm_to_string",
    "reply",
    "suggest_todo",
    "topic_config_string",
]

T = TypeVar("T")

#: ``FAQUrl`` (4.9.x): every FAQ link points at the same page.
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"
APPLY_TOPIC_URL = FAQ_URL
SUBSCRIPTION_GROUP_NOT_EXIST_URL = FAQ_URL
SAME_GROUP_DIFFERENT_TOPIC_URL = FAQ_URL


def suggest_todo(url: str) -> str:
    """``FAQUrl.suggestTodo``."""
    return f"\nSee {url} for further details."


def reply(
    code: int,
    remark: str | None = None,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
    header: Any = None,
) -> RemotingCommand:
    """A response with an ``extFields`` object always present (strings only).

    A response ``header`` object is encoded by its codec (the hand-written one for the
    send and pull headers) into the ext fields at once, in its declaration order, ``ext``
    after it: the bytes the real clients were tested against, and cheaper than leaving
    it as the command's custom header, which the serializer would reorder into Java's
    HashMap order on every write (about 2 us a send)."""
    if header is not None:
        fields = encode_header(header)
        if ext:
            fields.update(ext)
        ext = fields
    return RemotingCommand(code=code, flag=1, remark=remark, ext_fields={} if ext is None else ext, body=body)


def decode_request_header(cls: type[T], request: RemotingCommand) -> T:
    """Decode ``cls`` from the request's ext fields, or raise
    :class:`~trocket.broker.errors.HeaderError` (SYSTEM_ERROR) with the remark Java's
    ``RemotingCommandException`` gives (``the custom field <topic> is null``)."""
    try:
        return decode_header(cls, request.ext_fields)
    except CustomHeaderError as exc:
        raise HeaderError(f"RemotingCommandException: {exc.reason} ({exc.header}.{exc.field})") from None


@lru_cache(maxsize=4096)
def host_address(addr: str) -> HostAddress:
    """``"ip:port"`` of a peer -> :class:`HostAddress` for a record's BORNHOST.

    Records are written in the IPv4 layout (neither real client reads the IPv6 flags),
    so an IPv4-mapped IPv6 address is unwrapped and any other IPv6 peer becomes 0.0.0.0.
    """
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    if ":" in host or not host:
        host = "0.0.0.0"
    try:
        return HostAddress(host, int(port))
    except ValueError:
        return HostAddress("0.0.0.0", 0)


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: ``RW-`` for 6."""
    return (
        ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")
    )


def topic_config_string(tc: TopicConfig) -> str:
    """``TopicConfig.toString()`` as Java prints it in remarks."""
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={perm_to_string(tc.perm)}, "
        f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
        f"order={'true' if tc.order else 'false'}]"
    )
