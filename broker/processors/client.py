"""Client management: HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38,
CHECK_CLIENT_CONFIG 46; consumer-change notices (NOTIFY_CONSUMER_IDS_CHANGED 40,
broker -> client); the channel-close listener and the expiry scan.

RocketMQ 4.9.8's ``ClientManageProcessor``, ``ConsumerManageProcessor.getConsumerListByGroup``,
``Broker2Client.notifyConsumerIdsChanged``, ``DefaultConsumerIdsChangeListener`` and
``ClientHousekeepingService``. What each code answers:

* 34 HEART_BEAT: body ``HeartbeatData`` (C++ ints or JS names, see
  :mod:`trocket.codecs.bodies.client`). Each consumer group gets its retry topic
  ``%RETRY%<group>`` (1 queue, perm 6, as ``createTopicInSendMessageBackMethod``; a new
  one is registered with the name servers before the answer, as Java does) and
  its member registered; each producer group its member. SUCCESS. An undecodable body
  -> SYSTEM_ERROR (Java: the fastjson exception); the connection stays up.
  When a consumer group changed (new member, topic added/removed) and
  ``notify_consumer_ids_changed`` is on, every member gets a oneway
  NOTIFY_CONSUMER_IDS_CHANGED, the one that just joined too, as Java's
  ``ConsumerManager.registerConsumer``: a lite-pull consumer that subscribed rebalances
  on it at once, where it would otherwise wait for its 20 s periodic rebalance.
* 35 UNREGISTER_CLIENT: ``clientID`` + ``producerGroup`` and/or ``consumerGroup``
  (absent, empty or unknown are all fine) -> SUCCESS; the remaining members of the
  consumer group are notified.
* 38 GET_CONSUMER_LIST_BY_GROUP: SUCCESS + ``{"consumerIdList":[...]}`` (the clientIDs
  exactly as sent in heartbeats, sorted); a group with no member -> SYSTEM_ERROR
  ``no consumer for this group, <group>`` (Java's answer).
* 46 CHECK_CLIENT_CONFIG: SUCCESS for TAG subscriptions; SQL92 and other expression
  types -> SYSTEM_ERROR ``The broker does not support consumer to filter message by
  <type>`` unless ``enablePropertyFilter`` (off by default, as Java); with it, a SQL92
  expression is compiled (and cached, :mod:`trocket.broker.consumer_filter`): SUCCESS,
  or SUBSCRIPTION_PARSE_FAILED with Java's remark (``MQFilterException.getMessage()``,
  e.g. ``java.lang.RuntimeException: 'NULL' cannot be compared.``). A heartbeat's SQL92
  subscriptions are compiled as they come.

A heartbeat that creates a group's retry topic answers only once the topic is
registered with the name servers (up to :data:`REGISTER_NOW_TIMEOUT`), but that wait
runs in a handler of the connection (``conn.start_handler``), not on its reader: the
group's members are registered inline first, so a GET_CONSUMER_LIST_BY_GROUP pipelined
behind the heartbeat sees them, and the connection's other requests keep flowing while
the name server is slow. The other codes answer inline at once.

A connection that closes leaves every group it was in (:func:`register` adds
:func:`connection_closed` to the context's channel listener); :func:`run_housekeeping`
drops clients silent for 120 s every 10 s. Every answer is a JSON-able response with
an ``extFields`` object.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from trocket.codecs.bodies.client import (
    EXPRESSION_TYPE_SQL92,
    ConsumerData,
    ConsumerListByGroupResponseBody,
    HeartbeatData,
    SubscriptionData,
)
from trocket.codecs.bodies.fastjson import BodyDecodeError, loads
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.sql92 import FilterCompileError
from trocket.codecs.headers import (
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from trocket.codecs.message.sysflag import TOPIC_FLAG_UNIT_SUB
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, is_valid_topic
from trocket.codecs.serialize import encode_command
from trocket.remoting import Connection, exception_simple_desc, next_opaque
from trocket.remoting.errors import RemotingError

from ..client_manager import ClientChannelInfo
from ..outer_api import BROKER_VERSION
from ..store import TopicConfig
from . import decode_request_header, reply

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = [
    "ClientManageProcessor",
    "register",
    "notify_consumer_ids_changed",
    "notify_group_changed",
    "connection_closed",
    "scan_expired_clients",
    "run_housekeeping",
    "ensure_retry_topic",
    "retry_topic",
    "RETRY_QUEUE_NUMS",
    "HOUSEKEEPING_INTERVAL",
    "REGISTER_NOW_TIMEOUT",
]

log = logging.getLogger(__name__)

#: ``SubscriptionGroupConfig.retryQueueNums`` default: one retry queue per group.
RETRY_QUEUE_NUMS = 1
#: ``PermName.PERM_READ | PERM_WRITE``.
PERM_RW = 6
#: ``ClientHousekeepingService``: the expiry scan runs every 10 s.
HOUSEKEEPING_INTERVAL = 10.0
#: how long a heartbeat or send-back waits for the name-server registration at most
REGISTER_NOW_TIMEOUT = 5.0


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


# -- notices to consumers --------------------------------------------------------------------


def notify_consumer_ids_changed(conn: Connection, group: str) -> bool:
    """``Broker2Client.notifyConsumerIdsChanged``: a oneway NOTIFY_CONSUMER_IDS_CHANGED
    (40) with ``consumerGroup`` over the client's own connection. Never waits: when the
    connection's queue is full or it is closed the notice is dropped (Java gives it
    10 ms). Sent without RPC hooks (the broker signs nothing it sends to clients).
    True if queued."""
    request = RemotingCommand.request(
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        NotifyConsumerIdsChangedRequestHeader(consumerGroup=group),
        oneway=True,
    )
    request.opaque = next_opaque()
    try:
        return bool(conn.send_frame_nowait(encode_command(request)))
    except RemotingError:
        return False


def notify_group_changed(ctx: BrokerContext, group: str, *, exclude: Connection | None = None) -> int:
    """Tell every member of ``group`` (but ``exclude``) that its membership changed,
    if the broker's ``notify_consumer_ids_changed`` is on and the group's config
    (``notifyConsumerIdsChangedEnable``) does not say otherwise. Returns the notices queued."""
    if not ctx.config.notify_consumer_ids_changed:
        return 0
    sg = ctx.subscriptions.get(group)
    if sg is not None and not sg.notify_consumer_ids_changed_enable:
        return 0
    sent = 0
    for conn in ctx.consumers.channels(group):
        if conn is not exclude and notify_consumer_ids_changed(conn, group):
            sent += 1
    return sent


# -- connection events and expiry ----------------------------------------------------------


def connection_closed(ctx: BrokerContext, conn: Connection) -> None:
    """``ClientHousekeepingService.onChannelClose``: the connection leaves every
    consumer and producer group; remaining consumers are notified."""
    ctx.producers.connection_closed(conn)
    for group in ctx.consumers.connection_closed(conn):
        notify_group_changed(ctx, group)


def scan_expired_clients(ctx: BrokerContext, now: float | None = None) -> int:
    """``ClientHousekeepingService.scanExceptionChannel``: drop consumers and producers
    silent for longer than the expiry (120 s), close their connections (Java closes the
    channel too) and notify the groups' remaining members; then drop the SQL92 filter data
    no group has subscribed with for a day (:meth:`~trocket.broker.consumer_filter.ConsumerFilters.clean`).
    Returns how many clients went."""
    consumer_expired = ctx.consumers.scan_not_active(now)
    producer_expired = ctx.producers.scan_not_active(now)
    expired: list[tuple[str, ClientChannelInfo[Connection]]] = consumer_expired + producer_expired
    closed: set[int] = set()
    for group, member in expired:
        conn = member.channel
        log.warning(
            "SCAN: remove expired channel %s (client %s) of group %s", conn.remote_address, member.client_id, group
        )
        if id(conn) not in closed:
            closed.add(id(conn))
            try:
                conn.close("client channel expired")
            except Exception:
                log.debug("closing expired channel failed", exc_info=True)
    for group in {group for group, _ in consumer_expired}:
        notify_group_changed(ctx, group)
    ctx.filters.clean(now)
    return len(expired)


async def run_housekeeping(
    ctx: BrokerContext, *, interval: float = HOUSEKEEPING_INTERVAL, task_status=trio.TASK_STATUS_IGNORED
) -> None:
    """Run :func:`scan_expired_clients` every ``interval`` seconds until cancelled
    (start it in the broker's nursery)."""
    task_status.started()
    while True:
        await trio.sleep(interval)
        try:
            scan_expired_clients(ctx)
        except Exception:
            log.exception("client housekeeping scan failed")


# -- retry topics -----------------------------------------------------------------------


async def ensure_retry_topic(
    ctx: BrokerContext, group: str, unit_mode: bool = False, queue_nums: int = RETRY_QUEUE_NUMS,
) -> TopicConfig | None:
    """``createRetryTopic``: ``%RETRY%<group>`` with ``queue_nums`` queues (the group's
    ``retryQueueNums``, 1 by default), perm 6 (created once, persisted in a worker
    thread, then registered with the name servers before this returns, see
    :func:`register_now`). None when the name cannot be a topic."""
    topic = retry_topic(group)
    tc = ctx.topics.select(topic)
    if tc is not None:
        return tc
    if not is_valid_topic(topic):
        log.warning("group %r: its retry topic %r is not a legal topic name; not created", group, topic)
        return None
    sys_flag = TOPIC_FLAG_UNIT_SUB if unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
    tc = await trio.to_thread.run_sync(
        ctx.topics.create_in_send_back, topic, max(1, queue_nums), PERM_RW, sys_flag
    )
    log.info("created topic %s", topic)
    ctx.topic_created(topic)
    await register_now(ctx, topic)
    return tc


async def register_now(ctx: BrokerContext, topic: str) -> None:
    """Java's ``createTopicInSendMessageBackMethod`` registers with the name servers
    before it returns (``registerBrokerAll`` when the retry topic is new), so the
    client's next GET_ROUTEINFO_BY_TOPIC for ``%RETRY%<group>`` finds it. The JS client
    (ali-ons) asks right after its first heartbeat's answer and otherwise only
    refreshes routes every 30 s: its retry queue would go unpulled that long. Waits
    for ``ctx.register_now`` at most :data:`REGISTER_NOW_TIMEOUT`."""
    hook = ctx.register_now
    if hook is None:
        return
    with trio.move_on_after(REGISTER_NOW_TIMEOUT) as scope:
        try:
            await hook()
        except Exception:
            log.exception("registering %s with the name servers failed", topic)
    if scope.cancelled_caught:
        log.warning("registering %s with the name servers took more than %.0f s", topic, REGISTER_NOW_TIMEOUT)


# -- the processor ---------------------------------------------------------------------------


class ClientManageProcessor:
    """34, 35, 38 and 46 (see the module docstring); inline on the connection's reader."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._handlers = {
            int(RequestCode.HEART_BEAT): self.heart_beat,
            int(RequestCode.UNREGISTER_CLIENT): self.unregister_client,
            int(RequestCode.GET_CONSUMER_LIST_BY_GROUP): self.get_consumer_list_by_group,
            int(RequestCode.CHECK_CLIENT_CONFIG): self.check_client_config,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        return await self._handlers[request.code](conn, request)

    # -- 34 ------------------------------------------------------------------------------

    async def heart_beat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            data = HeartbeatData.decode(request.body)
        except BodyDecodeError as exc:
            return reply(ResponseCode.SYSTEM_ERROR, f"heartbeat body does not decode: {exc}")
        topics, groups = self.ctx.topics, self.ctx.subscriptions
        # each group's config (auto-created); a group without one gets no retry topic (Java's)
        new_retry = [
            (c, sg.retry_queue_nums) for c in data.consumers
            if topics.select(retry_topic(c.group_name)) is None and (sg := groups.find(c.group_name)) is not None
        ]
        self._register_clients(conn, request, data)
        if not new_retry:
            return _heartbeat_answer(reply(ResponseCode.SUCCESS))
        # creating a retry topic waits for the disk and the name servers: off the reader
        conn.start_handler(self._create_retry_topics_then_answer, conn, request, new_retry)
        return None

    def _register_clients(self, conn: Connection, request: RemotingCommand, data: HeartbeatData) -> None:
        ctx = self.ctx
        for consumer in data.consumers:
            changed = ctx.consumers.register(
                consumer.group_name,
                conn,
                data.client_id,
                consumer.consume_type,
                consumer.message_model,
                consumer.consume_from_where,
                consumer.subscriptions,
                language=request.language,
                version=request.version,
            )
            ctx.filters.register(consumer.group_name, consumer.subscriptions)
            if changed:
                log.info(
                    "consumer group %s changed: client %s from %s",
                    consumer.group_name, data.client_id, conn.remote_address,
                )
                notify_group_changed(ctx, consumer.group_name)
        for producer in data.producers:
            ctx.producers.register(
                producer.group_name, conn, data.client_id, language=request.language, version=request.version
            )

    async def _create_retry_topics_then_answer(
        self, conn: Connection, request: RemotingCommand, consumers: list[tuple[ConsumerData, int]]
    ) -> None:
        try:
            for consumer, queue_nums in consumers:
                await ensure_retry_topic(self.ctx, consumer.group_name, consumer.unit_mode, queue_nums)
            response = _heartbeat_answer(reply(ResponseCode.SUCCESS))
        except Exception as exc:  # answered here: this handler is past the endpoint's catch-all
            log.warning("heartbeat from %s: creating retry topics failed", conn.remote_address, exc_info=True)
            response = reply(ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))
        await conn.answer(request, response)

    # -- 35 ------------------------------------------------------------------------------

    async def unregister_client(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ctx = self.ctx
        header = decode_request_header(UnregisterClientRequestHeader, request)
        if header.producerGroup is not None:
            ctx.producers.unregister(header.producerGroup, conn)
        group = header.consumerGroup
        if group is not None:
            if ctx.consumers.unregister(group, conn):
                log.info("client %s left consumer group %s", header.clientID, group)
                notify_group_changed(ctx, group)
        return reply(ResponseCode.SUCCESS)

    # -- 38 ------------------------------------------------------------------------------

    async def get_consumer_list_by_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumerListByGroupRequestHeader, request)
        ids = self.ctx.consumers.consumer_ids(header.consumerGroup)
        if ids:
            return reply(ResponseCode.SUCCESS, body=ConsumerListByGroupResponseBody(ids).encode())
        log.warning("no consumer in group %s (asked by %s)", header.consumerGroup, conn.remote_address)
        return reply(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumerGroup}")

    # -- 46 ------------------------------------------------------------------------------

    async def check_client_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return reply(ResponseCode.SUCCESS)
        try:
            obj = loads(request.body)
        except BodyDecodeError as exc:
            return reply(ResponseCode.SYSTEM_ERROR, f"check client config body does not decode: {exc}")
        raw = obj.get("subscriptionData") if isinstance(obj, dict) else None
        if raw is None:
            return reply(ResponseCode.SUCCESS)
        sub = SubscriptionData.from_json(raw, "subscriptionData")
        if sub.is_tag_type:
            return reply(ResponseCode.SUCCESS)
        if not self.ctx.config.enable_property_filter:
            return reply(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        if sub.expression_type != EXPRESSION_TYPE_SQL92:
            return reply(ResponseCode.SUBSCRIPTION_PARSE_FAILED)  # Java: a NullPointerException, no message
        group = obj.get("group") if isinstance(obj.get("group"), str) else ""
        try:
            self.ctx.filters.compile(group, sub.topic, sub.sub_string or "")
        except FilterCompileError as exc:
            return reply(ResponseCode.SUBSCRIPTION_PARSE_FAILED, exc.remark)
        return reply(ResponseCode.SUCCESS)


def _heartbeat_answer(response: RemotingCommand) -> RemotingCommand:
    """A heartbeat's SUCCESS carries the broker's version, as every Java 4.9.8 answer
    does: the Java client keeps it per broker (``brokerVersionTable``) and refuses to
    send a SQL92 pull to a broker older than V4_1_0 (``The broker[...] does not
    upgrade to support for filter message by SQL92``)."""
    response.version = BROKER_VERSION
    return response


def register(ctx: BrokerContext) -> ClientManageProcessor:
    """Register 34, 35, 38 and 46 on ``ctx.server`` and make a closed connection leave
    its groups (:func:`connection_closed` on the context's channel listener).

    Inline: a client's 38 pipelined right behind its 34 must see the registration (a
    task would only start after the reader had already run the inline 38); the one
    slow part of a heartbeat, creating a retry topic, runs in a handler."""
    proc = ClientManageProcessor(ctx)
    ctx.channels.on_close.append(lambda conn: connection_closed(ctx, conn))
    for code in proc.codes:
        ctx.server.register_processor(code, proc, inline=True)
    return proc
