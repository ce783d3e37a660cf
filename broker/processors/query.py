"""Query codes: QUERY_MESSAGE 12, QUERY_CONSUME_QUEUE 321, GET_EARLIEST_MSG_STORETIME 32
(RocketMQ 4.9.8's ``QueryMessageProcessor`` and the query part of ``AdminBrokerProcessor``).

* 12: the messages the index (:mod:`trocket.broker.store.index`) names for ``key`` on
  ``topic`` stored within ``[beginTimestamp, endTimestamp]``, at most ``maxNum`` (and
  ``maxMsgsNumBatch``; a query by unique key, ext ``_UNIQUE_KEY_QUERY=true``, takes
  ``defaultQueryMaxNum`` whatever ``maxNum`` says). The body is the stored records one
  after another (a client decodes them as a pull's), the header the index's last update
  time and commit-log offset. Hash collisions are in the answer: a client keeps the
  messages whose keys (or unique key) really match, as Java's ``MQAdminImpl`` does.
  Nothing found: QUERY_NOT_FOUND ``can not find message, maybe time range not correct``.
  The index walk and the copy run in a worker thread: a long chain never stalls sends.
* 321: a consume queue's min and max offsets and ``count`` entries from ``index``
  (within the file holding ``index``, as Java's ``getIndexBuffer``), with the group's
  subscription when a group is given; SYSTEM_ERROR ``Q@T is not exist!`` for a queue
  the store does not have; an index outside the queue answers SUCCESS with the remark
  ``Index I of Q@T is not exist!`` and the body without entries (Java's answers no
  body, and its own client then fails with a NullPointerException decoding it).
* 32: the store time of the oldest message still in a queue, -1 when there is none.

Every handler runs as a task, ``admin_concurrency`` at once.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from trocket.codecs.bodies.query import ConsumeQueueData, QueryConsumeQueueResponseBody
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    UNIQUE_MSG_QUERY_FLAG,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
)
from trocket.remoting import Connection

from ..store.consume_queue import CQ_STORE_UNIT_SIZE
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["QueryProcessor", "register"]

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]
_CQ_ENTRY = struct.Struct(">qiq")


class QueryProcessor:
    """12, 321, 32 (see the module docstring)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._handlers: dict[int, Handler] = {
            int(RequestCode.QUERY_MESSAGE): self.query_message,
            int(RequestCode.QUERY_CONSUME_QUEUE): self.query_consume_queue,
            int(RequestCode.GET_EARLIEST_MSG_STORETIME): self.get_earliest_msg_storetime,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return await self._handlers[request.code](conn, request)

    # -- 12 --------------------------------------------------------------------------------

    def _query(self, header: QueryMessageRequestHeader, max_num: int) -> tuple[bytes, int, int]:
        records, last_ts, last_phy = self.ctx.store.query_message(
            header.topic, header.key, max_num, header.beginTimestamp, header.endTimestamp)
        try:
            return b"".join(records), last_ts, last_phy
        finally:
            for view in records:
                view.release()

    async def query_message(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(QueryMessageRequestHeader, request)
        max_num = header.maxNum
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self.ctx.store.config.default_query_max_num
        body, last_ts, last_phy = await trio.to_thread.run_sync(self._query, header, max_num)
        answer = QueryMessageResponseHeader(indexLastUpdateTimestamp=last_ts, indexLastUpdatePhyoffset=last_phy)
        if body:
            return reply(ResponseCode.SUCCESS, header=answer, body=body)
        return reply(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", header=answer)

    # -- 321 -------------------------------------------------------------------------------

    async def query_consume_queue(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(QueryConsumeQueueRequestHeader, request)
        topic, queue_id = header.topic, header.queueId
        cq = self.ctx.store.queues.find(topic, queue_id)
        if cq is None:
            return reply(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(max_queue_index=cq.max_offset, min_queue_index=cq.min_offset)
        group = header.consumerGroup
        if group is not None:
            sub = self.ctx.consumers.find_subscription(group, topic)
            body.subscription_data = sub
            # Java writes JSON.toJSONString(ConsumerFilterData): null for a tag subscription
            body.filter_data = f"{group}@{topic} is not online!" if sub is None else "null"
        view = cq.entries_from(header.index) if header.index >= 0 else None
        if view is None:  # Java answers without a body, on which its client dies (NPE)
            return reply(ResponseCode.SUCCESS, f"Index {header.index} of {queue_id}@{topic} is not exist!",
                         body=body.to_body())
        try:
            size = min(len(view), max(0, header.count) * CQ_STORE_UNIT_SIZE)
            body.queue_data = [
                ConsumeQueueData(*_CQ_ENTRY.unpack_from(view, pos)) for pos in range(0, size, CQ_STORE_UNIT_SIZE)
            ]
        finally:
            view.release()
        return reply(ResponseCode.SUCCESS, body=body.to_body())

    # -- 32 --------------------------------------------------------------------------------

    async def get_earliest_msg_storetime(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetEarliestMsgStoretimeRequestHeader, request)
        timestamp = self.ctx.store.get_earliest_message_time(header.topic, header.queueId)
        return reply(ResponseCode.SUCCESS, header=GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp))


def register(ctx: BrokerContext) -> QueryProcessor:
    """Register the query codes on ``ctx.server`` (tasks, ``admin_concurrency`` at once)."""
    proc = QueryProcessor(ctx)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, limit=ctx.config.admin_concurrency, queue=1024)
    return proc
