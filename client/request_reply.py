"""Request-reply, RocketMQ's RPC over messages (4.7+): the requester's side of
``DefaultMQProducerImpl.request`` (``prepareSendRequest``, ``RequestFutureHolder``,
``RequestResponseFuture``), the reply's arrival (``ClientRemotingProcessor.receiveReplyMessage``)
and the responder's helper (``MessageUtil.createReplyMessage``).

::

    # the requester
    reply = await producer.request(new_message("Rpc", b"2+2"), timeout=3)

    # the responder: a consumer of "Rpc" answers each request
    async def listener(msg):
        await send_reply(replier, msg, b"4")        # replier: any Producer
        return ConsumeResult.SUCCESS

The request carries ``CORRELATION_ID`` (a random UUID), ``REPLY_TO_CLIENT`` (the
requester's client id) and ``TTL`` (the timeout, ms); the broker adds ``CLUSTER``. The
reply goes to ``<cluster>_REPLY_TOPIC`` with ``MSG_TYPE=reply`` and the request's three
properties (a producer sends it with SEND_REPLY_MESSAGE_V2); the broker pushes it to the
requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT), where the client instance's
:class:`RequestTable` hands it to the waiting :class:`RequestFuture`. A reply that comes
after its request timed out (or for a request this client never sent) is logged and
dropped; the broker is answered SUCCESS all the same, as Java's client does.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from trocket.codecs.headers import ReplyMessageRequestHeader
from trocket.codecs.message.hosts import HostAddress
from trocket.codecs.message.properties import (
    PROPERTY_CLUSTER,
    PROPERTY_CORRELATION_ID,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_MESSAGE_TTL,
    PROPERTY_MESSAGE_TYPE,
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
    decode_properties,
)
from trocket.codecs.message.sysflag import COMPRESSED_FLAG
from trocket.codecs.names import REPLY_TOPIC_POSTFIX

from .errors import ClientError, RequestTimeoutError
from .futures import SendFuture
from .message import Message, MessageExt, SendResult

if TYPE_CHECKING:
    from .producer import Producer

__all__ = [
    "REPLY_MESSAGE_FLAG",
    "RequestFuture",
    "RequestTable",
    "create_reply_message",
    "prepare_request",
    "reply_from_push",
    "send_reply",
]

log = logging.getLogger(__name__)

#: ``MixAll.REPLY_MESSAGE_FLAG``
REPLY_MESSAGE_FLAG = "reply"


class RequestFuture(SendFuture):
    """A request's outcome: ``await fut`` returns the reply (a :class:`MessageExt`) or
    raises (:class:`~trocket.client.errors.RequestTimeoutError`, or the send's error);
    the optional callback gets ``(reply, error)`` once."""

    __slots__ = ("correlation_id", "deadline", "ttl_ms")

    def __init__(
        self, correlation_id: str, callback: Callable[[Any, BaseException | None], Any] | None = None,
        deadline: float = float("inf"), ttl_ms: int = 0,
    ) -> None:
        super().__init__(callback)
        self.correlation_id = correlation_id
        #: trio time the reply is waited for until, and the request's timeout (ms)
        self.deadline = deadline
        self.ttl_ms = ttl_ms

    async def wait_done(self) -> None:
        """Until the reply (or an error) is in, without raising it."""
        if not self._done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()

    def timed_out(self, topic: str) -> RequestTimeoutError:
        """Java's ``RequestTimeoutException`` text."""
        return RequestTimeoutError(
            f"send request message to <{topic}> OK, but wait reply message timeout, "
            f"{self.ttl_ms} ms."
        )

    def send_failed(self, error: BaseException) -> None:
        """The request was not sent: the future ends with the send's (typed) error."""
        self._finish(None, error)


class RequestTable:
    """``RequestFutureHolder``'s table, one per client instance (the replies arrive on
    its connections): correlation id -> :class:`RequestFuture`."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: dict[str, RequestFuture] = {}

    def __len__(self) -> int:
        return len(self._futures)

    def add(self, fut: RequestFuture) -> None:
        self._futures[fut.correlation_id] = fut

    def pop(self, correlation_id: str) -> RequestFuture | None:
        return self._futures.pop(correlation_id, None)

    def deliver(self, reply: MessageExt) -> bool:
        """``processReplyMessage``: complete the request ``reply`` answers; False when no
        request waits for it (timed out, or not ours)."""
        fut = self._futures.pop(reply.properties.get(PROPERTY_CORRELATION_ID, ""), None)
        if fut is None or fut.done():
            return False
        fut._finish(reply, None)
        return True


def prepare_request(msg: Message, client_id: str, timeout: float) -> str:
    """``prepareSendRequest``: the request properties on ``msg``; returns its correlation id."""
    correlation_id = str(uuid.uuid4())  # CorrelationIdUtil.createCorrelationId
    props = msg.properties
    props[PROPERTY_CORRELATION_ID] = correlation_id
    props[PROPERTY_MESSAGE_REPLY_TO_CLIENT] = client_id
    props[PROPERTY_MESSAGE_TTL] = str(int(timeout * 1000))
    return correlation_id


def create_reply_message(request: Message, body: bytes | str) -> Message:
    """``MessageUtil.createReplyMessage``: the reply to ``request`` (a request message as
    a consumer got it: the broker added its ``CLUSTER``), with ``body``."""
    if request is None:
        raise ClientError("create reply message fail, requestMessage cannot be null.")
    props = request.properties
    cluster = props.get(PROPERTY_CLUSTER)
    if cluster is None:
        raise ClientError(f"create reply message fail, requestMessage error, property[{PROPERTY_CLUSTER}] is null.")
    reply = Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body.encode("utf-8") if isinstance(body, str) else bytes(body))
    reply.properties[PROPERTY_MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for name in (PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL):
        value = props.get(name)
        if value is not None:
            reply.properties[name] = value
    return reply


async def send_reply(producer: Producer, request: Message, body: bytes | str, *, timeout: float | None = None) -> SendResult:
    """Answer ``request`` with ``body`` through ``producer`` (any
    :class:`~trocket.client.producer.Producer`): :func:`create_reply_message`, sent
    with SEND_REPLY_MESSAGE_V2. A requester gone or timed out makes the broker answer
    SYSTEM_ERROR (raised, after the producer's retries, as Java's)."""
    return await producer.send(create_reply_message(request, body), timeout=timeout)


def _host(text: str | None) -> HostAddress:
    if not text:
        return HostAddress("0.0.0.0", 0)
    host, _, port = text.rpartition(":")
    try:
        return HostAddress(host.strip("[]") or "0.0.0.0", int(port))
    except ValueError:
        return HostAddress("0.0.0.0", 0)


def reply_from_push(header: ReplyMessageRequestHeader, body: bytes, arrive_ms: int) -> MessageExt:
    """``receiveReplyMessage``: the reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries (its body
    inflated when compressed; ``ARRIVE_TIME`` added). ``zlib.error`` for a bad body."""
    if header.sysFlag & COMPRESSED_FLAG:
        body = zlib.decompress(body)
    props = decode_properties(header.properties or "")
    props[PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(arrive_ms)
    return MessageExt(
        topic=header.topic,
        body=bytes(body),
        flag=header.flag,
        properties=props,
        queue_id=header.queueId,
        born_timestamp=header.bornTimestamp,
        born_host=_host(header.bornHost),
        store_timestamp=header.storeTimestamp,
        store_host=_host(header.storeHost),
        reconsume_times=header.reconsumeTimes or 0,
    )
