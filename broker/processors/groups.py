"""Consumer-group administration: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, DELETE_SUBSCRIPTIONGROUP 207,
GET_CONSUMER_CONNECTION_LIST 203, GET_PRODUCER_CONNECTION_LIST 204,
QUERY_TOPIC_CONSUME_BY_WHO 300, CLONE_GROUP_OFFSET 314, INVOKE_BROKER_TO_RESET_OFFSET 222
(with RESET_CONSUMER_CLIENT_OFFSET 220 to the clients), GET_CONSUMER_RUNNING_INFO 307 and
CONSUME_MESSAGE_DIRECTLY 309 (forwarded to the client): the group part of RocketMQ
4.9.8's ``AdminBrokerProcessor`` and ``Broker2Client``.

* 200: the body is a ``SubscriptionGroupConfig``; created or replaced and persisted
  (``subscriptionGroup.json``). A body that does not decode, a group name that cannot be
  a group, or a negative ``retryQueueNums``/``retryMaxTimes`` is SYSTEM_ERROR naming the
  problem and changes nothing (Java stores whatever fastjson made of it). On a slave:
  SYSTEM_ERROR "Can't modify topic or subscription group from slave broker, ..." (200, 207).
* 201: ``SubscriptionGroupWrapper`` (the table and its data version), what a slave copies.
* 207: the config goes (SUCCESS even when there was none, as Java); ``removeOffset``
  also drops the group's consumer offsets.
* 203: ``ConsumerConnection`` (CONSUMER_NOT_ONLINE "the consumer group[G] not online");
  204: ``ProducerConnection`` (SYSTEM_ERROR "the producer group[G] not exist").
* 300: ``GroupList``: the groups online that subscribe to the topic and those with
  offsets on it.
* 314: the source group's offsets on one topic (or on every topic it has offsets for)
  copied to the destination group; a source group online that does not subscribe to a
  topic is skipped unless ``offline``.
* 222: the new offset of every write queue of the topic: the offset at ``timestamp``
  (-1: the max offset), or the group's current offset when that is lower and
  ``isForce`` is false. A group with no offset on the topic, no subscription-group
  config and no client subscribed to it is SYSTEM_ERROR "THe consumer group <G> not
  exist" (sic) and nothing changes; Java refuses a group lacking an offset on any one
  queue, which a consumer that never committed an empty queue's offset 0 (trocket's
  skips unchanged offsets) would hit. Every online client of the group is then sent
  RESET_CONSUMER_CLIENT_OFFSET (oneway; the C++ client, ``language`` CPP, gets
  ``ResetOffsetBodyForC``): it drops what it cached, moves its offsets and commits them,
  as Java's. With no client online Java answers CONSUMER_NOT_ONLINE and changes nothing
  (mqadmin then falls back to updating the offsets queue by queue); here the broker
  commits the new offsets itself and answers SUCCESS with the table, so the reset works
  with nobody online.
* 307, 309: the request is forwarded to the client (``clientId`` of the group) over its
  own connection and its answer returned (309 with the stored message as the body and
  ``brokerName`` added); SYSTEM_ERROR "The Consumer <G> <id> not online" when it is not
  connected here, CONSUME_MSG_TIMEOUT when it does not answer within 10 s.
* 328: ``ProducerTableInfo``: every producer connection by group (``remoteIP`` as Java's
  ``remoteAddress().toString()``, ``/127.0.0.1:port``; ``lastUpdateTimestamp`` the last
  heartbeat, epoch ms); ``{"data":{}}`` with none.
* 223 (``Broker2Client.getConsumeStatus``): each online client of the group (only
  ``clientAddr``, a client id, when given) is asked GET_CONSUMER_STATUS_FROM_CLIENT (221,
  5 s) for its offsets of ``topic``, all at once (Java asks one after the other); the answer maps client id -> its
  ``messageQueueTable``. A client that fails or times out is left out (logged), as in
  Java. No client online: SYSTEM_ERROR "No Any Consumer online in the consumer group:
  [G]" (Java's own text; Java's broker reaches it only for a group that still has an
  empty entry and otherwise fails with a NullPointerException, also SYSTEM_ERROR). Java's
  refusal of clients older than V3_0_7_SNAPSHOT is not made (no such client speaks to
  trocket).
* 308 (``queryCorrectionOffset``): per queue of ``topic``, the minimum committed offset
  over every group with offsets on it except ``filterGroups`` (comma-separated), counting
  only offsets not below the queue's minimum; then, for each queue ``compareGroup`` has
  an offset on, ``Long.MAX_VALUE`` where that minimum is above the compared group's
  offset. A filtered ``compareGroup`` is not compared. Java's
  ``queryMinOffsetInAllGroup`` removes the filtered groups' offsets from the broker's
  table while it reads (it iterates the live key set): not copied, nothing is removed
  here. Java fails (NullPointerException) when the compared group has a queue no
  counted offset covers; that queue is left out here.

Every handler runs as a task (``admin_concurrency`` at once).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from trocket.codecs.bodies.client import MessageQueue
from trocket.codecs.bodies.fastjson import BodyDecodeError
from trocket.codecs.bodies.groups import (
    Connection as ConnectionBody,
    ConsumerConnection,
    GetConsumerStatusBody,
    GroupList,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryCorrectionOffsetBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
)
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import LanguageCode, RemotingCommand
from trocket.codecs.errors import CodecError, InvalidNameError
from trocket.codecs.java_ints import INT64_MAX
from trocket.codecs.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetAllProducerInfoRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)
from trocket.codecs.message.msgid import decode_offset_msg_id
from trocket.codecs.names import validate_group
from trocket.codecs.serialize import encode_command
from trocket.remoting import Connection, RemotingTimeoutError, exception_simple_desc, next_opaque
from trocket.remoting.errors import RemotingError

from ..consume_stats import consumed_topics, topic_matters
from ..errors import BrokerError, ConsumeMsgTimeoutError, ConsumerNotOnlineError
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..client_manager import ClientChannelInfo
    from ..context import BrokerContext

__all__ = ["GroupsProcessor", "register", "reset_offsets", "SLAVE_REMARK"]

log = logging.getLogger(__name__)

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]

#: ``validateSlave``'s remark
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
#: ``Broker2Client.callClient``: how long a forwarded call may take
CALL_CLIENT_TIMEOUT = 10.0
#: ``Broker2Client.getConsumeStatus``: how long each client may take to answer
CONSUMER_STATUS_TIMEOUT = 5.0


def _language_name(language: LanguageCode | None) -> str:
    return language.name if language is not None else "OTHER"


def reset_offsets(ctx: BrokerContext, topic: str, group: str, timestamp: int, force: bool) -> dict[MessageQueue, int]:
    """``Broker2Client.resetOffset``'s table (see the module docstring); raises
    :class:`BrokerError` with Java's remarks for an unknown topic or group."""
    tc = ctx.topics.select(topic)
    if tc is None:
        raise BrokerError(f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
    store, offsets = ctx.store, ctx.offsets
    current = [offsets.query_offset(group, topic, queue_id) for queue_id in range(tc.write_queue_nums)]
    if all(c == -1 for c in current) and group not in ctx.subscriptions and topic not in ctx.consumers.topics_of(group):
        raise BrokerError(f"THe consumer group <{group}> not exist")
    table: dict[MessageQueue, int] = {}
    for queue_id, offset in enumerate(current):
        if timestamp == -1:
            target = store.get_max_offset(topic, queue_id)
        else:
            target = store.get_offset_by_time(topic, queue_id, timestamp)
        target = max(0, target)
        keep = offset != -1 and not force and target >= offset
        table[MessageQueue(topic, ctx.config.broker_name, queue_id)] = offset if keep else target
    return table


class GroupsProcessor:
    """200, 201, 207, 203, 204, 300, 314, 222, 307, 309, 328, 223, 308 (see the module docstring)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._handlers: dict[int, Handler] = {
            int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): self.update_and_create_subscription_group,
            int(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG): self.get_all_subscription_group,
            int(RequestCode.DELETE_SUBSCRIPTIONGROUP): self.delete_subscription_group,
            int(RequestCode.GET_CONSUMER_CONNECTION_LIST): self.get_consumer_connection_list,
            int(RequestCode.GET_PRODUCER_CONNECTION_LIST): self.get_producer_connection_list,
            int(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO): self.query_topic_consume_by_who,
            int(RequestCode.CLONE_GROUP_OFFSET): self.clone_group_offset,
            int(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET): self.invoke_broker_to_reset_offset,
            int(RequestCode.GET_CONSUMER_RUNNING_INFO): self.get_consumer_running_info,
            int(RequestCode.CONSUME_MESSAGE_DIRECTLY): self.consume_message_directly,
            int(RequestCode.GET_ALL_PRODUCER_INFO): self.get_all_producer_info,
            int(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS): self.invoke_broker_to_get_consumer_status,
            int(RequestCode.QUERY_CORRECTION_OFFSET): self.query_correction_offset,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return await self._handlers[request.code](conn, request)

    def _refuse_on_slave(self) -> None:
        if self.ctx.config.is_slave:
            raise BrokerError(SLAVE_REMARK)

    # -- 200 / 201 / 207 ----------------------------------------------------------------

    async def update_and_create_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self._refuse_on_slave()
        try:
            config = SubscriptionGroupConfig.from_body(request.body or b"")
        except BodyDecodeError as exc:
            raise BrokerError(f"the subscription group config does not decode: {exc}") from None
        try:
            validate_group(config.group_name)
        except InvalidNameError as exc:
            raise BrokerError(str(exc)) from None
        for name, value in (("retryQueueNums", config.retry_queue_nums), ("retryMaxTimes", config.retry_max_times)):
            if value < 0:
                raise BrokerError(f"{name} of subscription group {config.group_name} is {value}: it cannot be negative")
        log.info("updateAndCreateSubscriptionGroup called by %s", conn.remote_address)
        await trio.to_thread.run_sync(self.ctx.subscriptions.update, config)
        return reply(ResponseCode.SUCCESS)

    async def get_all_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return reply(ResponseCode.SUCCESS, body=self.ctx.subscriptions.wrapper().to_body())

    async def delete_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        self._refuse_on_slave()
        header = decode_request_header(DeleteSubscriptionGroupRequestHeader, request)
        group = header.groupName
        log.info("deleteSubscriptionGroup %s called by %s", group, conn.remote_address)
        if not await trio.to_thread.run_sync(self.ctx.subscriptions.delete, group):
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
        if header.removeOffset:
            self.ctx.offsets.remove_group(group)
        return reply(ResponseCode.SUCCESS)

    # -- 203 / 204 / 300 ----------------------------------------------------------------

    async def get_consumer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumerConnectionListRequestHeader, request)
        info = self.ctx.consumers.group_info(header.consumerGroup)
        if info is None:
            raise ConsumerNotOnlineError(f"the consumer group[{header.consumerGroup}] not online")
        body = ConsumerConnection(
            connections=[
                ConnectionBody(m.client_id, m.channel.remote_address, _language_name(m.language), m.version)
                for m in list(info.channels.values())
            ],
            subscriptions=dict(info.subscriptions),
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        return reply(ResponseCode.SUCCESS, body=body.to_body())

    async def get_producer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetProducerConnectionListRequestHeader, request)
        members = self.ctx.producers.members(header.producerGroup)
        if not members:
            raise BrokerError(f"the producer group[{header.producerGroup}] not exist")
        body = ProducerConnection([
            ConnectionBody(m.client_id, m.channel.remote_address, _language_name(m.language), m.version) for m in members
        ])
        return reply(ResponseCode.SUCCESS, body=body.to_body())

    async def query_topic_consume_by_who(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(QueryTopicConsumeByWhoRequestHeader, request)
        groups = self.ctx.consumers.topic_consumed_by(header.topic) | self.ctx.offsets.groups_of_topic(header.topic)
        return reply(ResponseCode.SUCCESS, body=GroupList(sorted(groups)).to_body())

    # -- 314 ----------------------------------------------------------------------------

    async def clone_group_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(CloneGroupOffsetRequestHeader, request)
        ctx = self.ctx
        src, dest = header.srcGroup, header.destGroup
        for topic in consumed_topics(ctx.offsets, ctx.topics, src, header.topic or None):
            if not header.offline and not topic_matters(ctx.consumers, src, topic):
                log.warning("[cloneGroupOffset], the consumer group[%s], topic[%s] not exist", src, topic)
                continue
            if ctx.offsets.clone_offset(src, dest, topic):
                log.info("cloned offsets of %s on %s to %s (from %s)", src, topic, dest, conn.remote_address)
        return reply(ResponseCode.SUCCESS)

    # -- 222 ----------------------------------------------------------------------------

    async def invoke_broker_to_reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ResetOffsetRequestHeader, request)
        ctx = self.ctx
        topic, group = header.topic, header.group
        log.info(
            "[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, isForce=%s",
            conn.remote_address, topic, group, header.timestamp, header.isForce,
        )
        table = reset_offsets(ctx, topic, group, header.timestamp, bool(header.isForce))
        info = ctx.consumers.group_info(group)
        members = list(info.channels.values()) if info is not None else []
        if not members:  # nobody to tell: the broker moves the offsets itself
            for mq, offset in table.items():
                ctx.offsets.commit_offset(group, topic, mq.queue_id, offset)
        body = ResetOffsetBody(table)
        for_java, for_c = body.to_body(), body.to_body_for_c()
        notice = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            ResetOffsetRequestHeader(topic=topic, group=group, timestamp=header.timestamp, isForce=bool(header.isForce)),
            oneway=True,
        )
        told = 0
        for member in members:
            notice.body = for_c if member.language is LanguageCode.CPP else for_java
            notice.opaque = next_opaque()
            try:
                if member.channel.send_frame_nowait(encode_command(notice)):
                    told += 1
            except RemotingError as exc:
                log.warning("[reset-offset] telling %s failed: %s", member.channel.remote_address, exc)
        log.info("[reset-offset] %s on %s reset to %s; %d online client(s) told", group, topic,
                 {mq.queue_id: o for mq, o in table.items()}, told)
        return reply(ResponseCode.SUCCESS, body=for_c if request.language is LanguageCode.CPP else for_java)

    # -- 307 / 309 ----------------------------------------------------------------------

    async def _call_consumer(self, request: RemotingCommand, code: int, group: str, client_id: str | None,
                             ext: dict[str, str], body: bytes) -> RemotingCommand:
        """``callConsumer``: the request forwarded to the client, its answer returned."""
        member = self.ctx.consumers.find_channel(group, client_id) if client_id else None
        if member is None:
            raise BrokerError(f"The Consumer <{group}> <{client_id}> not online")
        forward = RemotingCommand(code=code, ext_fields=dict(ext), body=body)
        try:
            answer = await self.ctx.server.invoke_sync(member.channel, forward, CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            raise ConsumeMsgTimeoutError(f"consumer <{group}> <{client_id}> Timeout: {exception_simple_desc(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - Java answers any failure of the call
            raise BrokerError(f"invoke consumer <{group}> <{client_id}> Exception: {exception_simple_desc(exc)}") from None
        return reply(answer.code, answer.remark, dict(answer.ext_fields or {}), answer.body or b"")

    async def get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumerRunningInfoRequestHeader, request)
        return await self._call_consumer(request, int(RequestCode.GET_CONSUMER_RUNNING_INFO), header.consumerGroup,
                                         header.clientId, request.ext_fields or {}, request.body or b"")

    async def consume_message_directly(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(ConsumeMessageDirectlyResultRequestHeader, request)
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = self.ctx.config.broker_name
        body = b""
        try:
            offset = decode_offset_msg_id(header.msgId or "").offset
        except (CodecError, ValueError):
            offset = -1
        view = self.ctx.store.select_one_message_by_offset(offset) if offset >= 0 else None
        if view is not None:
            try:
                body = bytes(view)
            finally:
                view.release()
        return await self._call_consumer(request, int(RequestCode.CONSUME_MESSAGE_DIRECTLY), header.consumerGroup,
                                         header.clientId, ext, body)

    # -- 328 ----------------------------------------------------------------------------

    async def get_all_producer_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        decode_request_header(GetAllProducerInfoRequestHeader, request)
        producers = self.ctx.producers
        now, now_ms = producers.clock(), time.time_ns() // 1_000_000
        data = {
            group: [
                ProducerInfo(m.client_id, f"/{m.channel.remote_address}", _language_name(m.language), m.version,
                             now_ms - int((now - m.last_update) * 1000))
                for m in members
            ]
            for group, members in producers.snapshot().items()
            if members
        }
        return reply(ResponseCode.SUCCESS, body=ProducerTableInfo(data).to_body())

    # -- 223 ----------------------------------------------------------------------------

    async def invoke_broker_to_get_consumer_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumerStatusRequestHeader, request)
        group, only = header.group, header.clientAddr or None
        log.info("[get-consumer-status] get consumer status by %s. topic=%s, group=%s",
                 conn.remote_address, header.topic, group)
        info = self.ctx.consumers.group_info(group)
        members = list(info.channels.values()) if info is not None else []
        if not members:
            raise BrokerError(f"No Any Consumer online in the consumer group: [{group}]")
        if only is not None:
            members = [m for m in members if m.client_id == only][:1]
        table: dict[str, dict[MessageQueue, int]] = {}

        async def ask(member: ClientChannelInfo[Connection]) -> None:
            request = RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, GetConsumerStatusRequestHeader(topic=header.topic, group=group)
            )
            try:
                answer = await self.ctx.server.invoke_sync(member.channel, request, CONSUMER_STATUS_TIMEOUT)
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    table[member.client_id] = GetConsumerStatusBody.from_body(answer.body).message_queue_table
            except Exception as exc:  # noqa: BLE001 - Java logs any failure and goes on
                log.error("[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s",
                          header.topic, group, exception_simple_desc(exc))

        # all at once (Java asks one after the other: a group of dead clients took 5 s each)
        async with trio.open_nursery() as nursery:
            for member in members:
                nursery.start_soon(ask, member)
        return reply(ResponseCode.SUCCESS, body=GetConsumerStatusBody(consumer_table=table).to_body())

    # -- 308 ----------------------------------------------------------------------------

    async def query_correction_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(QueryCorrectionOffsetHeader, request)
        topic, offsets, store = header.topic, self.ctx.offsets, self.ctx.store
        left_out = set(header.filterGroups.split(",")) if header.filterGroups and header.filterGroups.strip() else set()
        correction: dict[int, int] = {}
        for group in offsets.groups_of_topic(topic) - left_out:
            for queue_id, offset in offsets.query_all(group, topic).items():
                if offset >= store.get_min_offset(topic, queue_id):
                    correction[queue_id] = min(offset, correction.get(queue_id, INT64_MAX))
        if header.compareGroup not in left_out:
            for queue_id, offset in offsets.query_all(header.compareGroup, topic).items():
                if queue_id in correction and correction[queue_id] > offset:
                    correction[queue_id] = INT64_MAX
        return reply(ResponseCode.SUCCESS, body=QueryCorrectionOffsetBody(correction).to_body())


def register(ctx: BrokerContext) -> GroupsProcessor:
    """Register the group codes on ``ctx.server`` (tasks, ``admin_concurrency`` at once)."""
    proc = GroupsProcessor(ctx)
    for code in proc.codes:
        ctx.server.register_processor(code, proc, limit=ctx.config.admin_concurrency, queue=1024)
    return proc
