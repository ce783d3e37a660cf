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
  ``notify_consumer_ids_changed`` is on, every *other* member gets a oneway
  NOTIFY_CONSUMER_IDS_CHANGED (Java also tells the member that just joined; it has
  just rebalanced anyway, so that one is skipped here).
* 35 UNREGISTER_CLIENT: ``clientID`` + ``producerGroup`` and/or ``consumerGroup``
  (absent, empty or unknown are all fine) -> SUCCESS; the remaining members of the
  consumer group are notified.
* 38 GET_CONSUMER_LIST_BY_GROUP: SUCCESS + ``{"consumerIdList":[...]}`` (the clientIDs
  exactly as sent in heartbeats, sorted); a group with no member -> SYSTEM_ERROR
  ``no consumer for this group, <group>`` (Java's answer).
* 46 CHECK_CLIENT_CONFIG: SUCCESS for TAG subscriptions; SQL92 and other expression
  types -> SYSTEM_ERROR ``The broker does not support consumer to filter message by
  <type>`` (Java with ``enablePropertyFilter=false``, the default).

A connection that closes leaves every group it was in (the listener installed by
:func:`register`); :func:`run_housekeeping` drops clients silent for 120 s every 10 s.
Every answer is a JSON-able response with an ``extFields`` object.
"""

from __future__ import annotations

import functools
import logging
import weakref
from typing import Any, Awaitable, Callable

import trio

from trocket.codecs.bodies.client import (
    ConsumerListByGroupResponseBody,
    HeartbeatData,
    SubscriptionData,
)
from trocket.codecs.bodies.fastjson import BodyDecodeError, loads
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.errors import CodecError
from trocket.codecs.headers import (
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from trocket.codecs.names import RETRY_GROUP_TOPIC_PREFIX, is_valid_topic
from trocket.codecs.serialize import encode_command
from trocket.remoting import ChannelEventListener, next_opaque
from trocket.remoting.endpoint import exception_simple_desc
from trocket.remoting.errors import RemotingError

from . import HeaderError, decode_request_header, reply

__all__ = [
    "register",
    "ClientChannelListener",
    "install_channel_listener",
    "notify_consumer_ids_changed",
    "notify_group_changed",
    "connection_closed",
    "scan_expired_clients",
    "run_housekeeping",
    "ensure_retry_topic",
    "retry_topic",
    "topic_created",
    "guarded",
    "RETRY_QUEUE_NUMS",
    "HOUSEKEEPING_INTERVAL",
]

log = logging.getLogger(__name__)

#: ``SubscriptionGroupConfig.retryQueueNums`` default: one retry queue per group.
RETRY_QUEUE_NUMS = 1
#: ``PermName.PERM_READ | PERM_WRITE``.
PERM_RW = 6
#: ``TopicSysFlag.buildSysFlag(false, true)``: a unit-mode group's retry topic.
TOPIC_SYS_FLAG_UNIT_SUB = 0x2
#: ``ClientHousekeepingService``: the expiry scan runs every 10 s.
HOUSEKEEPING_INTERVAL = 10.0

Processor = Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]]


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def guarded(fn: Processor) -> Processor:
    """Turn what a processor raises into an answer with ``extFields``: a malformed
    header -> its :class:`HeaderError` response; a malformed body (any codec error) ->
    SYSTEM_ERROR with the reason; anything else -> SYSTEM_ERROR as remoting would
    answer (``Type: message, where``), logged. The connection stays up."""

    @functools.wraps(fn)
    async def wrapper(conn: Any, request: RemotingCommand) -> RemotingCommand | None:
        try:
            return await fn(conn, request)
        except HeaderError as exc:
            return exc.response
        except CodecError as exc:
            return reply(ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:
            log.warning("processor for code %d from %s raised", request.code, getattr(conn, "remote_address", "?"), exc_info=True)
            return reply(ResponseCode.SYSTEM_ERROR, exception_simple_desc(exc))

    return wrapper


# -- notices to consumers --------------------------------------------------------------------


def notify_consumer_ids_changed(conn: Any, group: str) -> bool:
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
    except Exception:  # a closed or foreign channel: never fail the caller over a notice
        log.debug("notify %s of a change in %s failed", conn, group, exc_info=True)
        return False


def notify_group_changed(ctx: Any, group: str, *, exclude: Any = None) -> int:
    """Tell every member of ``group`` (but ``exclude``) that its membership changed,
    if the broker's ``notify_consumer_ids_changed`` is on. Returns the notices queued."""
    if not getattr(ctx.config, "notify_consumer_ids_changed", True):
        return 0
    sent = 0
    for conn in ctx.consumers.channels(group):
        if conn is not exclude and notify_consumer_ids_changed(conn, group):
            sent += 1
    return sent


# -- connection events and expiry ----------------------------------------------------------


def connection_closed(ctx: Any, conn: Any) -> None:
    """``ClientHousekeepingService.onChannelClose``: the connection leaves every
    consumer and producer group; remaining consumers are notified."""
    if ctx.producers is not None:
        ctx.producers.connection_closed(conn)
    if ctx.consumers is not None:
        for group in ctx.consumers.connection_closed(conn):
            notify_group_changed(ctx, group)


class ClientChannelListener(ChannelEventListener):
    """Removes a closed connection's clients; forwards every event to ``inner`` (the
    listener that was installed before, if it could not take another one). Re-entrant
    calls (an inner listener that fans events back here) are ignored."""

    def __init__(self, ctx: Any, inner: ChannelEventListener | None = None) -> None:
        self.ctx = ctx
        self.inner = inner
        self._busy = False

    def _forward(self, event: str, *args: Any) -> None:
        inner = self.inner
        if inner is None or self._busy:
            return
        self._busy = True
        try:
            getattr(inner, event)(*args)
        finally:
            self._busy = False

    def on_channel_connect(self, remote_addr: str, conn: Any) -> None:
        self._forward("on_channel_connect", remote_addr, conn)

    def on_channel_close(self, remote_addr: str, conn: Any) -> None:
        if self._busy:
            return
        try:
            connection_closed(self.ctx, conn)
        finally:
            self._forward("on_channel_close", remote_addr, conn)

    def on_channel_exception(self, remote_addr: str, conn: Any, error: BaseException) -> None:
        # the close event follows (a failed connection is always closed)
        self._forward("on_channel_exception", remote_addr, conn, error)

    def on_channel_idle(self, remote_addr: str, conn: Any) -> None:
        self._forward("on_channel_idle", remote_addr, conn)


def _installed(listener: Any, ctx: Any, depth: int = 0) -> ClientChannelListener | None:
    if listener is None or depth > 8:
        return None
    if isinstance(listener, ClientChannelListener) and listener.ctx is ctx:
        return listener
    for inner in [getattr(listener, "inner", None), *getattr(listener, "listeners", ())]:
        found = _installed(inner, ctx, depth + 1)
        if found is not None:
            return found
    return None


def install_channel_listener(ctx: Any) -> ClientChannelListener:
    """Make ``ctx.server``'s channel events reach a :class:`ClientChannelListener`
    (idempotent). A fan-out listener already on the server (one with ``add``, like the
    controller's) gets it added; any other listener is wrapped (events forwarded to it);
    with none, it becomes the server's listener."""
    current = ctx.server.listener
    found = _installed(current, ctx)
    if found is not None:
        return found
    add = getattr(current, "add", None)
    if callable(add):
        listener = ClientChannelListener(ctx)
        add(listener)
        return listener
    listener = ClientChannelListener(ctx, current)
    ctx.server.listener = listener
    return listener


def scan_expired_clients(ctx: Any, now: float | None = None) -> int:
    """``ClientHousekeepingService.scanExceptionChannel``: drop consumers and producers
    silent for longer than the expiry (120 s), close their connections (Java closes the
    channel too) and notify the groups' remaining members. Returns how many went."""
    consumer_expired = ctx.consumers.scan_not_active(now) if ctx.consumers is not None else []
    producer_expired = ctx.producers.scan_not_active(now) if ctx.producers is not None else []
    expired = consumer_expired + producer_expired
    closed: set[int] = set()
    for group, member in expired:
        channel = member.channel
        log.warning(
            "SCAN: remove expired channel %s (client %s) of group %s",
            getattr(channel, "remote_address", channel), member.client_id, group,
        )
        close = getattr(channel, "close", None)
        if close is not None and id(channel) not in closed:
            closed.add(id(channel))
            try:
                close("client channel expired")
            except Exception:
                log.debug("closing expired channel failed", exc_info=True)
    for group in {group for group, _ in consumer_expired}:
        notify_group_changed(ctx, group)
    return len(expired)


async def run_housekeeping(
    ctx: Any, *, interval: float = HOUSEKEEPING_INTERVAL, task_status=trio.TASK_STATUS_IGNORED
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


def _apply_config(ctx: Any) -> None:
    """Copy the broker's expiry knobs into the managers the controller created."""
    cfg = ctx.config
    expiry = getattr(cfg, "channel_expired_timeout_ms", None)
    if expiry is not None:
        for mgr in (ctx.consumers, ctx.producers):
            if mgr is not None and hasattr(mgr, "channel_expired_timeout"):
                mgr.channel_expired_timeout = expiry / 1000.0
    live = getattr(cfg, "rebalance_lock_max_live_ms", None)
    if live is not None and ctx.locks is not None and hasattr(ctx.locks, "max_live_time"):
        ctx.locks.max_live_time = live / 1000.0


# -- retry topics -----------------------------------------------------------------------


async def ensure_retry_topic(ctx: Any, group: str, unit_mode: bool = False) -> Any:
    """``createRetryTopic``: ``%RETRY%<group>`` with 1 queue, perm 6 (created once,
    persisted in a worker thread). None when the name cannot be a topic."""
    topic = retry_topic(group)
    tc = ctx.topics.select(topic)
    if tc is not None:
        return tc
    if not is_valid_topic(topic):
        log.warning("group %r: its retry topic %r is not a legal topic name; not created", group, topic)
        return None
    sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if unit_mode else 0
    tc = await trio.to_thread.run_sync(
        ctx.topics.create_in_send_back, topic, RETRY_QUEUE_NUMS, PERM_RW, sys_flag
    )
    log.info("created topic %s", topic)
    topic_created(ctx, topic)
    await _register_now(ctx, topic)
    return tc


def topic_created(ctx: Any, topic: str) -> None:
    """Tell the controller a topic was created (it registers with the name servers
    soon; Java registers at once): the ``on_topic_created`` given to :func:`register`,
    else ``ctx.extras["on_topic_created"]`` if the context has extras; called with the
    topic name."""
    hook = _topic_hooks.get(ctx)
    if hook is None:
        extras = getattr(ctx, "extras", None) or {}
        hook = extras.get("on_topic_created")
    if callable(hook):
        try:
            hook(topic)
        except Exception:
            log.exception("on_topic_created hook failed for %s", topic)


#: ctx -> the ``on_topic_created`` given to :func:`register` (BrokerContext is slotted)
_topic_hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: ctx -> the ``register_now`` given to :func:`register`
_register_hooks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: how long a heartbeat or send-back waits for that registration at most
REGISTER_NOW_TIMEOUT = 5.0


def _remember_topic_hook(ctx: Any, hook: Callable[[str], None] | None) -> None:
    if hook is not None:
        _topic_hooks[ctx] = hook


async def _register_now(ctx: Any, topic: str) -> None:
    """Java's ``createTopicInSendMessageBackMethod`` registers with the name servers
    before it returns (``registerBrokerAll`` when the retry topic is new), so the
    client's next GET_ROUTEINFO_BY_TOPIC for ``%RETRY%<group>`` finds it. The JS client
    (ali-ons) asks right after its first heartbeat's answer and otherwise only
    refreshes routes every 30 s: its retry queue would go unpulled that long."""
    hook = _register_hooks.get(ctx)
    if hook is None:
        return
    with trio.move_on_after(REGISTER_NOW_TIMEOUT) as scope:
        try:
            await hook()
        except Exception:
            log.exception("registering %s with the name servers failed", topic)
    if scope.cancelled_caught:
        log.warning("registering %s with the name servers took more than %.0f s", topic, REGISTER_NOW_TIMEOUT)


# -- processors ---------------------------------------------------------------------------


def make_heart_beat(ctx: Any) -> Processor:
    async def heart_beat(conn: Any, request: RemotingCommand) -> RemotingCommand:
        try:
            data = HeartbeatData.decode(request.body)
        except BodyDecodeError as exc:
            return reply(ResponseCode.SYSTEM_ERROR, f"heartbeat body does not decode: {exc}")
        for consumer in data.consumers:
            await ensure_retry_topic(ctx, consumer.group_name, consumer.unit_mode)
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
            if changed:
                log.info(
                    "consumer group %s changed: client %s from %s",
                    consumer.group_name, data.client_id, getattr(conn, "remote_address", "?"),
                )
                notify_group_changed(ctx, consumer.group_name, exclude=conn)
        for producer in data.producers:
            ctx.producers.register(
                producer.group_name, conn, data.client_id, language=request.language, version=request.version
            )
        return reply(ResponseCode.SUCCESS)

    return heart_beat


def make_unregister_client(ctx: Any) -> Processor:
    async def unregister_client(conn: Any, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(UnregisterClientRequestHeader, request)
        if header.producerGroup is not None:
            ctx.producers.unregister(header.producerGroup, conn)
        group = header.consumerGroup
        if group is not None:
            if ctx.consumers.unregister(group, conn):
                log.info("client %s left consumer group %s", header.clientID, group)
                notify_group_changed(ctx, group)
        return reply(ResponseCode.SUCCESS)

    return unregister_client


def make_get_consumer_list(ctx: Any) -> Processor:
    async def get_consumer_list_by_group(conn: Any, request: RemotingCommand) -> RemotingCommand:
        header = decode_request_header(GetConsumerListByGroupRequestHeader, request)
        ids = ctx.consumers.consumer_ids(header.consumerGroup)
        if ids:
            return reply(ResponseCode.SUCCESS, body=ConsumerListByGroupResponseBody(ids).encode())
        log.warning("no consumer in group %s (asked by %s)", header.consumerGroup, getattr(conn, "remote_address", "?"))
        return reply(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumerGroup}")

    return get_consumer_list_by_group


def make_check_client_config(ctx: Any) -> Processor:
    async def check_client_config(conn: Any, request: RemotingCommand) -> RemotingCommand:
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
        return reply(
            ResponseCode.SYSTEM_ERROR,
            f"The broker does not support consumer to filter message by {sub.expression_type}",
        )

    return check_client_config


def register(
    ctx: Any,
    *,
    on_topic_created: Callable[[str], None] | None = None,
    register_now: Callable[[], Awaitable[Any]] | None = None,
) -> None:
    """Register 34, 35, 38 and 46 on ``ctx.server``, install the channel-close listener
    and apply the broker's expiry settings to the managers. ``on_topic_created(name)``
    is called when a heartbeat or a send-back creates a retry or DLQ topic;
    ``register_now()`` (the controller's registration with the name servers) is
    awaited once a new retry topic exists, before the heartbeat or send-back that
    created it is answered."""
    if ctx.consumers is None or ctx.producers is None:
        raise ValueError("BrokerContext.consumers and .producers must be set before registering")
    _remember_topic_hook(ctx, on_topic_created)
    if register_now is not None:
        _register_hooks[ctx] = register_now
    _apply_config(ctx)
    install_channel_listener(ctx)
    server = ctx.server
    # Inline: a client's 38 pipelined right behind its 34 must see the registration
    # (a task would only start after the reader had already run the inline 38). The
    # only wait inside is the first creation of a group's retry topic.
    server.register_processor(RequestCode.HEART_BEAT, guarded(make_heart_beat(ctx)), inline=True)
    server.register_processor(RequestCode.UNREGISTER_CLIENT, guarded(make_unregister_client(ctx)), inline=True)
    server.register_processor(RequestCode.GET_CONSUMER_LIST_BY_GROUP, guarded(make_get_consumer_list(ctx)), inline=True)
    server.register_processor(RequestCode.CHECK_CLIENT_CONFIG, guarded(make_check_client_config(ctx)), inline=True)

