"""Statistics codes: VIEW_BROKER_STATS_DATA 315, GET_BROKER_CONSUME_STATS 317,
GET_CONSUME_STATS 208, GET_TOPIC_STATS_INFO 202, QUERY_CONSUME_TIME_SPAN 303 (the
statistics part of RocketMQ 4.9.8's ``AdminBrokerProcessor``).

* 315: one stats item's last minute, hour and day (``BrokerStatsData``); an unknown
  name or key is SYSTEM_ERROR ``The stats <name> <key> not exist`` (an item exists once
  something was counted under its key, see :mod:`trocket.broker.stats`).
* 317: ``ConsumeStatsList``: for every subscription group (the table Java iterates), its
  ``ConsumeStats`` per topic it has offsets on, over the topic's write queues, and the
  broker's total diff; ``isOrder`` keeps ordered topics only.
* 208: a group's ``ConsumeStats`` on one topic or on every topic it has offsets for
  (the topic's read queues), with its consume TPS of the last minute.
* 202: ``TopicStatsTable`` of a topic's write queues (TOPIC_NOT_EXIST ``topic[T] not
  exist`` for an unknown topic).
* 303: ``QueryConsumeTimeSpanBody``: per write queue, the first and last store times,
  the group's consume time and how long its next message has waited.

The figures come from :mod:`trocket.broker.consume_stats`, which the metrics endpoint
shares. Every handler runs as a task (``admin_concurrency`` at once).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Awaitable, Callable

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.bodies.stats import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStats,
    ConsumeStatsList,
    OffsetWrapper,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    TopicOffset,
    TopicStatsTable,
)
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from trocket.remoting import Connection

from ..consume_stats import QueueOffsets, consumed_topics, queue_offsets, topic_matters
from ..errors import BrokerError, TopicNotExistError
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext
    from ..stats import BrokerStatsService

__all__ = ["StatsProcessor", "register", "known_groups"]

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]


def _item(snap) -> BrokerStatsItem:
    return BrokerStatsItem(snap.sum, snap.tps, snap.avgpt)


def known_groups(ctx: BrokerContext) -> list[str]:
    """The consumer groups 317 reports: Java's subscription-group table (the built-in
    groups, those created by an operator, and those auto-created by a pull, a heartbeat
    or a send-back), sorted."""
    return sorted(ctx.subscriptions.all())


class StatsProcessor:
    """315, 317, 208, 202, 303 (see the module docstring)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._handlers: dict[int, Handler] = {
            int(RequestCode.VIEW_BROKER_STATS_DATA): self.view_broker_stats_data,
            int(RequestCode.GET_BROKER_CONSUME_STATS): self.get_broker_consume_stats,
            int(RequestCode.GET_CONSUME_STATS): self.get_consume_stats,
            int(RequestCode.GET_TOPIC_STATS_INFO): self.get_topic_stats_info,
            int(RequestCode.QUERY_CONSUME_TIME_SPAN): self.query_consume_time_span,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    @property
    def stats(self) -> BrokerStatsService:
        if self.ctx.stats is None:
            raise BrokerError("this broker keeps no statistics")
        return self.ctx.stats

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return await self._handlers[request.code](conn, request)

    def _mq(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.ctx.config.broker_name, queue_id)

    def _consume_stats(self, queues: list[QueueOffsets], group: str, topic: str) -> ConsumeStats:
        table = {
            self._mq(q.topic, q.queue_id): OffsetWrapper(q.broker_offset, q.consumer_offset, q.last_timestamp)
            for q in queues
        }
        return ConsumeStats(table, self.stats.group_get_tps(group, topic))

    # -- 315 -------------------------------------------------------------------------------

    async def view_broker_stats_data(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ViewBrokerStatsDataRequestHeader, request)
        stats = self.stats
        stats.refresh()
        item = stats.item(header.statsName, header.statsKey)
        if item is None:
            raise BrokerError(f"The stats <{header.statsName}> <{header.statsKey}> not exist")
        data = BrokerStatsData(_item(item.in_minute()), _item(item.in_hour()), _item(item.in_day()))
        return reply(ResponseCode.SUCCESS, body=data.to_body())

    # -- 317 -------------------------------------------------------------------------------

    async def get_broker_consume_stats(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumeStatsInBrokerHeader, request)
        ctx = self.ctx
        self.stats.refresh()
        out: list[dict[str, list[ConsumeStats]]] = []
        total = 0
        for group in known_groups(ctx):
            per_topic = []
            for topic in consumed_topics(ctx.offsets, ctx.topics, group):
                tc = ctx.topics.select(topic)
                assert tc is not None
                if header.isOrder and not tc.order:
                    continue
                if not topic_matters(ctx.consumers, group, topic):
                    continue
                cs = self._consume_stats(queue_offsets(ctx.store, ctx.offsets, group, topic, tc.write_queue_nums), group, topic)
                total += cs.total_diff
                per_topic.append(cs)
            out.append({group: per_topic})
        body = ConsumeStatsList(out, ctx.broker_addr(), total)
        return reply(ResponseCode.SUCCESS, body=body.to_body())

    # -- 208 -------------------------------------------------------------------------------

    async def get_consume_stats(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumeStatsRequestHeader, request)
        ctx = self.ctx
        group = header.consumerGroup
        self.stats.refresh()
        result = ConsumeStats()
        for topic in consumed_topics(ctx.offsets, ctx.topics, group, header.topic or None):
            if not topic_matters(ctx.consumers, group, topic):
                continue
            tc = ctx.topics.select(topic)
            assert tc is not None
            cs = self._consume_stats(queue_offsets(ctx.store, ctx.offsets, group, topic, tc.read_queue_nums), group, topic)
            result.offset_table.update(cs.offset_table)
            result.consume_tps += cs.consume_tps
        return reply(ResponseCode.SUCCESS, body=result.to_body())

    # -- 202 -------------------------------------------------------------------------------

    async def get_topic_stats_info(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetTopicStatsInfoRequestHeader, request)
        topic = header.topic
        tc = self.ctx.topics.select(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        store = self.ctx.store
        table = {}
        for queue_id in range(tc.write_queue_nums):
            low = max(0, store.get_min_offset(topic, queue_id))
            high = max(0, store.get_max_offset(topic, queue_id))
            last = store.get_message_store_timestamp(topic, queue_id, high - 1) if high > 0 else 0
            table[self._mq(topic, queue_id)] = TopicOffset(low, high, last)
        return reply(ResponseCode.SUCCESS, body=TopicStatsTable(table).to_body())

    # -- 303 -------------------------------------------------------------------------------

    async def query_consume_time_span(self, conn, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(QueryConsumeTimeSpanRequestHeader, request)
        topic, group = header.topic, header.group
        ctx = self.ctx
        tc = ctx.topics.select(topic)
        if tc is None:
            raise TopicNotExistError(f"topic[{topic}] not exist")
        store = ctx.store
        now_ms = int(time.time() * 1000)
        spans = []
        for queue_id in range(tc.write_queue_nums):
            min_time = store.get_earliest_message_time(topic, queue_id)
            max_offset = store.get_max_offset(topic, queue_id)
            max_time = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            consumer_offset = ctx.offsets.query_offset(group, topic, queue_id)
            if consumer_offset > 0:
                consume_time = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
            else:
                consume_time = min_time
            delay = 0
            if consumer_offset < max_offset:
                next_time = store.get_message_store_timestamp(topic, queue_id, consumer_offset)
                delay = now_ms - next_time
            spans.append(QueueTimeSpan(self._mq(topic, queue_id), min_time, max_time, consume_time, delay))
        return reply(ResponseCode.SUCCESS, body=QueryConsumeTimeSpanBody(spans).to_body())


def register(ctx: BrokerContext) -> StatsProcessor:
    """Register the statistics codes on ``ctx.server`` (tasks, ``admin_concurrency`` at once)."""
    proc = StatsProcessor(ctx)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, limit=ctx.config.admin_concurrency, queue=1024)
    return proc
