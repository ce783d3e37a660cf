"""Consumer offsets: QUERY_CONSUMER_OFFSET 14 and UPDATE_CONSUMER_OFFSET 15.

RocketMQ 4.9.8's ``ConsumerManageProcessor.queryConsumerOffset`` / ``updateConsumerOffset``:

* 14 (``consumerGroup, topic, queueId``): the committed offset when there is one and
  it is >= 0 -> SUCCESS + ``offset``. Otherwise (never committed, or a negative value
  was committed, as the JS client does with -1): when the queue's min offset is <= 0
  and its first message is not swapped out of memory -> SUCCESS + ``offset "0"`` (a new
  group reads the queue from its start; the real clients would otherwise skip to the
  max offset); else QUERY_NOT_FOUND (22) ``Not found, V3_0_6_SNAPSHOT maybe this group
  consumer boot first``. trocket's store serves everything from memory maps, so the
  first message never counts as swapped out (Java's ``checkInDiskByConsumeOffset``).
* 15 (``consumerGroup, topic, queueId, commitOffset``): stored as given, negative
  values included -> SUCCESS. The C++ and JS clients send it without the oneway flag
  and drop the answer.

Both answer with an ``extFields`` object (strings only); a malformed header ->
SYSTEM_ERROR naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from trocket.remoting import Connection

from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["ConsumerOffsetProcessor", "register", "query_offset", "QUERY_NOT_FOUND_REMARK"]

QUERY_NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def query_offset(ctx: BrokerContext, group: str, topic: str, queue_id: int) -> int | None:
    """The offset QUERY_CONSUMER_OFFSET answers, or None for QUERY_NOT_FOUND."""
    offset = ctx.offsets.query_offset(group, topic, queue_id)
    if offset >= 0:
        return offset
    if ctx.store.get_min_offset(topic, queue_id) <= 0:
        return 0  # checkInDiskByConsumeOffset(topic, queueId, 0) is always false here
    return None


class ConsumerOffsetProcessor:
    """14 and 15, inline on the connection's reader (they never block)."""

    codes = (int(RequestCode.QUERY_CONSUMER_OFFSET), int(RequestCode.UPDATE_CONSUMER_OFFSET))

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return self.query_consumer_offset(request)
        return self.update_consumer_offset(request)

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = decode_request_header(QueryConsumerOffsetRequestHeader, request)
        offset = query_offset(self.ctx, h.consumerGroup, h.topic, h.queueId)
        if offset is None:
            return reply(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)
        return reply(ResponseCode.SUCCESS, header=QueryConsumerOffsetResponseHeader(offset=offset))

    def update_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = decode_request_header(UpdateConsumerOffsetRequestHeader, request)
        self.ctx.offsets.commit_offset(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return reply(ResponseCode.SUCCESS)


def register(ctx: BrokerContext) -> ConsumerOffsetProcessor:
    """Register 14 and 15 on ``ctx.server`` (inline: they never block)."""
    proc = ConsumerOffsetProcessor(ctx)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, inline=True)
    return proc
