"""SEND_REPLY_MESSAGE 324 and SEND_REPLY_MESSAGE_V2 325: request-reply's replies.

RocketMQ 4.9.8's ``ReplyMessageProcessor``. A requester (``producer.request()``) sent a
message carrying ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL``; the
broker added ``CLUSTER`` (as to every message it stores). The responder builds the reply
with ``MessageUtil.createReplyMessage`` (topic ``<cluster>_REPLY_TOPIC``,
``MSG_TYPE=reply``) and sends it with these codes (V1 header / V2 header). The broker:

1. checks it as a send (``msgCheck``: :meth:`.send.SendProcessor._msg_check`, the same
   codes and remarks);
2. pushes it to the requester: PUSH_REPLY_MESSAGE_TO_CLIENT (326) over the connection of
   the producer whose client id is ``REPLY_TO_CLIENT`` (known from its heartbeats), the
   reply's body and a :class:`~trocket.codecs.headers.ReplyMessageRequestHeader` (the
   send header's fields, the replier's and the store's addresses, the properties plus
   ``PUSH_REPLY_TIME``), waiting up to 10 s for its answer (``callClient``);
3. stores it on its topic too (``storeReplyMessageEnable``, on by default);
4. answers SUCCESS when the push succeeded -- with the stored record's msgId and queue
   offset, or msgId ``0`` and offset 0 when not stored -- else SYSTEM_ERROR with Java's
   remark: ``reply message properties[REPLY_TO_CLIENT] is null``, ``push reply message
   fail, channel of <id> not found.``, ``push reply message to <id>fail.`` (sic).

A task per reply (the push waits for the requester), within ``send_concurrency`` at
once and ``send_queue_capacity`` waiting (Java: its own reply pool).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers.fast import send_fields_of
from trocket.codecs.headers import (
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from trocket.codecs.message.properties import (
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_PUSH_REPLY_TIME,
    get_property,
)
from trocket.remoting import Connection, RemotingError

from ..store import PutMessageError, tags_hash
from ..store.messages import message_inner
from . import decode_request_header, host_address, reply
from .send import _OK_EXT, SendProcessor

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["ReplyProcessor", "register"]

log = logging.getLogger(__name__)

#: ``Broker2Client.callClient``'s timeout for the push
PUSH_TIMEOUT = 10.0
_V2 = int(RequestCode.SEND_REPLY_MESSAGE_V2)


class ReplyProcessor:
    """324 and 325, a task each (see the module docstring)."""

    def __init__(self, ctx: BrokerContext, send: SendProcessor) -> None:
        self.ctx = ctx
        self.send = send
        #: counters: replies pushed to their requester, replies not pushed
        self.pushed = 0
        self.push_failures = 0

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if request.code == _V2:
            header = decode_request_header(SendMessageRequestHeaderV2, request).to_v1()
        else:
            header = decode_request_header(SendMessageRequestHeader, request)
        send = self.send
        tc, _ = send._msg_check(conn, send_fields_of(header))  # AbstractSendMessageProcessor.msgCheck, as the send path's
        queue_id = send._pick_queue(header.queueId, tc)
        props = header.properties or ""
        remark = await self._push(conn, header, request.body, props)
        response = SendMessageResponseHeader(msgId="0", queueId=queue_id, queueOffset=0)
        if self.ctx.config.store_reply_message:
            msg = message_inner(
                header.topic, request.body, queue_id, header.flag, props.encode("utf-8"), header.sysFlag,
                header.bornTimestamp, host_address(conn.remote_address), header.reconsumeTimes or 0,
                tags_hash(get_property(props, "TAGS")),
            )
            try:
                result = self.ctx.store.put_message(msg)
            except (PutMessageError, UnicodeEncodeError) as exc:
                log.warning("storing the reply to %s failed: %s", header.topic, exc)
            else:
                response = SendMessageResponseHeader(msgId=result.msg_id, queueId=queue_id, queueOffset=result.queue_offset)
        if remark is not None:
            self.push_failures += 1
            return reply(ResponseCode.SYSTEM_ERROR, remark, dict(_OK_EXT), header=response if response.msgId != "0" else None)
        self.pushed += 1
        return reply(ResponseCode.SUCCESS, None, dict(_OK_EXT), header=response)

    async def _push(self, conn: Connection, header: SendMessageRequestHeader, body: bytes, props: str) -> str | None:
        """``pushReplyMessage``: None once the requester took the reply, else the remark."""
        sender = get_property(props, PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = self.ctx.producers.find_channel(sender)
        if channel is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return remark
        sep = "" if not props or props[-1] == "\x02" else "\x02"
        store_host = self.ctx.store.config.store_host
        push = ReplyMessageRequestHeader(
            producerGroup=header.producerGroup, topic=header.topic, defaultTopic=header.defaultTopic,
            defaultTopicQueueNums=header.defaultTopicQueueNums, queueId=header.queueId, sysFlag=header.sysFlag,
            bornTimestamp=header.bornTimestamp, flag=header.flag,
            properties=f"{props}{sep}{PROPERTY_PUSH_REPLY_TIME}\x01{time.time_ns() // 1_000_000}",
            reconsumeTimes=header.reconsumeTimes, unitMode=header.unitMode, bornHost=conn.remote_address,
            storeHost=f"{store_host[0]}:{store_host[1]}", storeTimestamp=time.time_ns() // 1_000_000,
        )
        request = RemotingCommand.request(int(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT), push, body=body)
        try:
            answer = await self.ctx.server.invoke_sync(channel, request, PUSH_TIMEOUT)
        except RemotingError as exc:
            log.warning("push reply message to <%s> failed: %s", sender, exc)
            return f"push reply message to {sender}fail."
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> returned %d: %s", sender, answer.code, answer.remark)
            return f"push reply message to {sender}fail."
        return None


def register(ctx: BrokerContext, send: SendProcessor) -> ReplyProcessor:
    """Register 324 and 325 on ``ctx.server`` (``send``: the send processor, whose checks
    a reply goes through)."""
    proc = ReplyProcessor(ctx, send)
    ctx.server.register_processor(
        (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2), proc,
        limit=ctx.config.send_concurrency, queue=ctx.config.send_queue_capacity,
    )
    return proc
