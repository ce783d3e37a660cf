"""ClientInstance: what producers and consumers of one client id share (Java's ``MQClientInstance``).

Contract:

- ``async with ClientInstance(config) as inst:`` runs it: a
  :class:`~trocket.remoting.RemotingClient` (one connection per broker and name server), a
  route poll every ``poll_namesrv_interval`` (30 s) and a heartbeat every
  ``heartbeat_interval`` (30 s). On exit every registered group is unregistered from every
  broker (UNREGISTER_CLIENT) and the connections close. Java shares one instance per client
  id in a process-wide table; under trio's structured concurrency sharing is explicit: pass
  one instance to several producers/consumers (``instance=``), or let each make its own.
- Routes: :meth:`route` (cached; fetched on demand), :meth:`update_route` (from the name
  servers, rotating on failure), :meth:`publish_info` (producers: writable queues, the
  TBW102 fallback for a topic that does not exist yet), :meth:`subscribe_queues`
  (consumers). The broker table maps broker name -> {broker id: address}, id 0 the master:
  :meth:`master_addr`, :meth:`find_in_subscribe` / :meth:`broker_addr` (a slave when asked
  for or when the master is gone, as consumers pull and store offsets); brokers no route
  names any more are dropped after each poll (:meth:`clean_offline_brokers`); a closed
  connection to a broker fetches the routes naming it again at once (:meth:`on_broker_closed`).
- Registration: :meth:`register_producer` / :meth:`unregister_producer` by group (a
  transaction producer with a :class:`ProducerHandle` that gets the broker's
  CHECK_TRANSACTION_STATE for its group);
  :meth:`register_consumer` takes a :class:`ConsumerHandle` (its ``consumer_data()`` goes
  into every heartbeat; it receives route changes of its topics and the broker's requests)
  and :meth:`unregister_consumer`. Registering sends a heartbeat soon (:meth:`heartbeat_now`).
- Replies (request-reply): PUSH_REPLY_MESSAGE_TO_CLIENT completes the request waiting in
  :attr:`requests` (:class:`~trocket.client.request_reply.RequestTable`) by its
  correlation id; a reply nobody waits for is logged and dropped.
- Broker -> client requests reach the registered consumer of the request's group:
  NOTIFY_CONSUMER_IDS_CHANGED (-> ``on_consumer_ids_changed``), GET_CONSUMER_RUNNING_INFO
  (-> ``running_info``), CONSUME_MESSAGE_DIRECTLY (-> ``consume_directly``),
  RESET_CONSUMER_CLIENT_OFFSET (-> ``reset_offset``). A group with no consumer here gets
  Java's SYSTEM_ERROR "The Consumer Group <g> not exist in this consumer"; a handle that
  raises ``NotImplementedError`` a SYSTEM_ERROR saying the client does not support it.
  GET_CONSUMER_STATUS_FROM_CLIENT (-> ``offset_table``) answers a ``GetConsumerStatusBody``,
  its table empty for a group with no consumer here (Java's ``Collections.EMPTY_MAP``).
- Broker calls for consumers are the typed methods of :attr:`api`
  (:class:`~trocket.client.api.ClientAPI`: pull, offsets, consumer list, locks, send
  back, search/max/min offset); pick the address with :meth:`master_addr`.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import attrs
import trio

from trocket.codecs.bodies.client import ConsumerData, HeartbeatData, MessageQueue, ProducerData
from trocket.codecs.bodies.groups import GetConsumerStatusBody
from trocket.codecs.bodies.route import TopicRouteData
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.errors import CodecError
from trocket.codecs.headers import (
    CheckTransactionStateRequestHeader,
    GetConsumerStatusRequestHeader,
    ReplyMessageRequestHeader,
)
from trocket.codecs.message import decode_record
from trocket.codecs.message.properties import PROPERTY_PRODUCER_GROUP, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from trocket.codecs.names import AUTO_CREATE_TOPIC_KEY_TOPIC
from trocket.remoting import ClientConfig as RemotingConfig
from trocket.remoting import ChannelEventListener, Connection, RemotingClient, ServiceContextManager
from trocket.remoting.events import Channel

from .acl import AclSigningHook
from .api import ClientAPI
from .config import ClientConfig
from .errors import ClientError, ClientStateError, NoRouteError
from .message import MessageExt
from .request_reply import RequestTable, reply_from_push
from .route import (
    MASTER_ID,
    MAX_ROUTE_QUEUES,
    TopicPublishInfo,
    default_route,
    publish_info,
    route_queue_count,
    subscribe_queues,
)

__all__ = ["ClientInstance", "ConsumerHandle", "ProducerHandle"]

log = logging.getLogger(__name__)

#: ``defaultTopicQueueNums``: queues a topic auto-created through TBW102 gets
DEFAULT_TOPIC_QUEUE_NUMS = 4


@runtime_checkable
class ConsumerHandle(Protocol):
    """What a consumer registers with the instance (Java: ``MQConsumerInner``)."""

    group: str

    def consumer_data(self) -> ConsumerData:
        """The heartbeat's entry for this group (model, where from, subscriptions)."""

    def subscribed_topics(self) -> Iterable[str]:
        """Topics whose routes the instance keeps fresh for this consumer."""

    def on_route_changed(self, topic: str, queues: list[MessageQueue]) -> None:
        """A subscribed topic's readable queues changed (``updateTopicSubscribeInfo``)."""

    def on_consumer_ids_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: rebalance soon (must not block)."""

    async def running_info(self) -> bytes:
        """GET_CONSUMER_RUNNING_INFO's body (``ConsumerRunningInfo`` JSON); may raise
        ``NotImplementedError``."""

    async def consume_directly(self, msg: MessageExt, broker_name: str | None) -> bytes:
        """CONSUME_MESSAGE_DIRECTLY's body (``ConsumeMessageDirectlyResult`` JSON); may raise
        ``NotImplementedError``."""

    async def reset_offset(self, topic: str, timestamp: int, body: bytes) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (``ResetOffsetBody`` in ``body``); may raise
        ``NotImplementedError``."""

    def offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets held in memory of ``topic``'s
        queues (every topic's when blank; Java's ``cloneOffsetTable``)."""


@runtime_checkable
class ProducerHandle(Protocol):
    """What a producer that answers the broker's checks registers with the instance
    (Java: ``MQProducerInner.checkTransactionState``)."""

    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """CHECK_TRANSACTION_STATE about ``msg`` from the broker at ``addr``: answer it
        later (END_TRANSACTION); must not block."""


@attrs.define(slots=True)
class _Producer:
    group: str
    topics: set[str] = attrs.field(factory=set)
    handle: ProducerHandle | None = None


class _BrokerCloseListener(ChannelEventListener):
    def __init__(self, inst: ClientInstance) -> None:
        self.inst = inst

    def on_channel_close(self, remote_addr: str, conn: Channel) -> None:
        # the instance's connections are dialled: ``peer`` is the address the route gave
        self.inst.on_broker_closed(conn.peer or remote_addr)


def _check_route_size(topic: str, route: TopicRouteData) -> None:
    """A route listing more than :data:`~.route.MAX_ROUTE_QUEUES` queues fails at once."""
    n = route_queue_count(route)
    if n > MAX_ROUTE_QUEUES:
        raise NoRouteError(
            f"the route of topic {topic} lists {n} queues, more than the client handles ({MAX_ROUTE_QUEUES}): refused"
        )


def _signing_hooks(config: ClientConfig) -> list[AclSigningHook]:
    """Java's ``AclClientRPCHook`` when the config has credentials: every request signed."""
    if config.access_key and config.secret_key:
        return [AclSigningHook(config.access_key, config.secret_key)]
    return []


class ClientInstance(ServiceContextManager):
    """One client id's routes, connections, heartbeats and registrations."""

    def __init__(self, config: ClientConfig, *, remoting: RemotingClient | None = None) -> None:
        self.config = config
        self.client_id = config.client_id
        self.remoting = remoting or RemotingClient(
            RemotingConfig(
                connect_timeout=config.connect_timeout,
                default_timeout=config.call_timeout,
                async_permits=config.async_permits,
                oneway_permits=config.oneway_permits,
                idle_timeout=None,  # heartbeats every 30 s keep connections; Java's client has no idle close
            ),
            listener=_BrokerCloseListener(self),
            hooks=_signing_hooks(config),
            ssl_context=config.tls.client_context(),
        )
        self.api = ClientAPI(self.remoting, config)
        self.routes: dict[str, TopicRouteData] = {}
        self.publish: dict[str, TopicPublishInfo] = {}
        #: broker name -> {broker id: address}
        self.brokers: dict[str, dict[int, str]] = {}
        self.producers: dict[str, _Producer] = {}
        self.consumers: dict[str, ConsumerHandle] = {}
        #: requests (request-reply) waiting for their reply, by correlation id
        self.requests = RequestTable()
        self._route_locks: dict[str, trio.Lock] = {}
        self._heartbeat_soon = trio.Event()
        self._heartbeat_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._running = False
        self._register_processors()

    # -- lifecycle ----------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.remoting.run)
            self._nursery = nursery
            self._running = True
            nursery.start_soon(self._route_loop)
            nursery.start_soon(self._heartbeat_loop)
            task_status.started(self)

    async def aclose(self) -> None:
        """Unregister every group from every broker, then close the connections."""
        if not self._running:
            return
        self._running = False
        with trio.move_on_after(self.config.call_timeout):
            for group in list(self.producers):
                await self._unregister(producer_group=group)
            for group in list(self.consumers):
                await self._unregister(consumer_group=group)
        self.producers.clear()
        self.consumers.clear()
        await self.remoting.aclose()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def _abort(self) -> None:
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    def check_running(self) -> None:
        if not self._running:
            raise ClientStateError("the client instance is not running (use `async with`)")

    def start_soon(self, fn, *args) -> None:
        """Run a background task in the instance's nursery (cancelled at shutdown)."""
        self.check_running()
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    # -- registration -------------------------------------------------------------------

    def register_producer(self, group: str, handle: ProducerHandle | None = None) -> None:
        """``handle``: where the broker's CHECK_TRANSACTION_STATE for the group goes (a
        transaction producer); without one they are logged and dropped, as Java's."""
        if group in self.producers:
            raise ClientError(f"producer group {group} is already registered in client {self.client_id}")
        self.producers[group] = _Producer(group, handle=handle)
        self.heartbeat_now()

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None and self._running:
            await self._unregister(producer_group=group)

    def register_consumer(self, handle: ConsumerHandle) -> None:
        if handle.group in self.consumers:
            raise ClientError(f"consumer group {handle.group} is already registered in client {self.client_id}")
        self.consumers[handle.group] = handle
        self.heartbeat_now()

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None and self._running:
            await self._unregister(consumer_group=group)

    async def _unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """UNREGISTER_CLIENT for one group at every broker, concurrently (a hung broker
        costs one call timeout, not one per broker)."""

        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(
                    addr, self.client_id, producer_group=producer_group, consumer_group=consumer_group
                )
            except ClientError as exc:
                log.warning("unregister of %s from %s failed: %s", producer_group or consumer_group, addr, exc)

        async with trio.open_nursery() as nursery:
            for addr in self._all_broker_addrs(masters_only=False):
                nursery.start_soon(one, addr)

    # -- routes -------------------------------------------------------------------------

    def find_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this: bool = False
    ) -> tuple[str, bool] | None:
        """``findBrokerAddressInSubscribe``: (address, is a slave) of ``broker_id`` (for a
        slave id, id + 1 when that one is unknown); unless ``only_this``, another of the
        group when neither is known (master first). None when the name is unknown."""
        addrs = self.brokers.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None and broker_id != MASTER_ID:
            broker_id += 1
            addr = addrs.get(broker_id)
        if addr is not None:
            return addr, broker_id != MASTER_ID
        if only_this:
            return None
        broker_id = MASTER_ID if MASTER_ID in addrs else min(addrs)
        return addrs[broker_id], broker_id != MASTER_ID

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID, *, only_this: bool = False) -> str | None:
        """The address part of :meth:`find_in_subscribe`."""
        found = self.find_in_subscribe(broker_name, broker_id, only_this=only_this)
        return found[0] if found else None

    def master_addr(self, broker_name: str) -> str | None:
        """``findBrokerAddressInPublish``."""
        addrs = self.brokers.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def _all_broker_addrs(self, *, masters_only: bool) -> list[str]:
        out = []
        for addrs in self.brokers.values():
            for broker_id, addr in addrs.items():
                if broker_id == MASTER_ID or not masters_only:
                    out.append(addr)
        return sorted(set(out))

    async def update_route(self, topic: str, *, timeout: float | None = None) -> TopicRouteData | None:
        """Fetch ``topic``'s route now (one fetch at a time per topic; concurrent callers
        share it). ``None`` when the name servers do not know the topic; the cached route
        is kept then. Name-server failures raise (ClientConnectError / ClientTimeoutError)."""
        lock = self._route_locks.get(topic)
        if lock is None:
            lock = self._route_locks[topic] = trio.Lock()
        if lock.locked():  # somebody is fetching: wait for theirs
            async with lock:
                return self.routes.get(topic)
        async with lock:
            route = await self.api.get_route(topic, timeout)
            if route is not None:
                _check_route_size(topic, route)
                self._apply_route(topic, route)
            return route

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        changed = self.routes.get(topic) != route
        self._learn_brokers(route)
        if not changed:
            return
        self.routes[topic] = route
        if topic in self.publish or any(topic in p.topics for p in self.producers.values()):
            self.publish[topic] = publish_info(topic, route)
        queues = None
        for handle in list(self.consumers.values()):
            if topic in handle.subscribed_topics():
                if queues is None:
                    queues = subscribe_queues(topic, route)
                handle.on_route_changed(topic, queues)

    def _learn_brokers(self, route: TopicRouteData) -> None:
        for bd in route.broker_datas:
            known = self.brokers.get(bd.broker_name)
            if known != bd.broker_addrs:
                if known is None:
                    self.heartbeat_now()  # a broker we never told about us
                self.brokers[bd.broker_name] = dict(bd.broker_addrs)

    async def route(self, topic: str, *, timeout: float | None = None) -> TopicRouteData:
        """The cached route, fetched when there is none; :class:`NoRouteError` if unknown."""
        route = self.routes.get(topic)
        if route is None:
            route = await self.update_route(topic, timeout=timeout)
            if route is None:
                raise NoRouteError(await self.no_route_reason(topic))
        return route

    async def no_route_reason(self, topic: str, route: TopicRouteData | None = None, *,
                              default_topic: str | None = None) -> str:
        """Why ``topic`` has no usable route, in words that say what to do: no broker at
        all is registered with the name servers (a broker is down or points elsewhere),
        the topic's brokers have no live master, or the topic does not exist. Asks the
        name servers for the cluster (only on this error path). ``default_topic``: the
        topic a send would have created it from, which they do not know either."""
        where = f"the name servers {';'.join(self.config.namesrv)}"
        if route is not None:
            return (f"no broker serves topic {topic}: {where} know it but list no live master with a "
                    "writable queue for it")
        try:
            cluster = await self.api.get_cluster_info(timeout=min(self.config.call_timeout, 3.0))
        except ClientError:
            cluster = None
        if cluster is not None and not any(bd.broker_addrs for bd in cluster.broker_addr_table.values()):
            return (f"no broker serves topic {topic}: {where} list no live broker (is a broker running and "
                    "registered with them?)")
        reason = f"topic {topic} does not exist ({where} have no route for it)"
        if default_topic is not None:
            reason += (f", and they know no {default_topic} with a writable queue to create it from (create the topic "
                       "first, or let the brokers auto-create topics)")
        return reason

    async def subscribe_queues(self, topic: str, *, timeout: float | None = None) -> list[MessageQueue]:
        """``fetchSubscribeMessageQueues``: the topic's readable queues."""
        return subscribe_queues(topic, await self.route(topic, timeout=timeout))

    async def publish_info(
        self, topic: str, group: str | None = None, *, timeout: float | None = None,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC, default_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    ) -> TopicPublishInfo:
        """``tryToFindTopicPublishInfo``: the cached info; else the topic's route; else
        ``default_topic``'s route with its queue counts cut to ``default_queue_nums`` (the
        broker creates the topic on the first send). :class:`NoRouteError` if neither."""
        info = self.publish.get(topic)
        if info is not None and info.ok:
            return info
        if group is not None and group in self.producers:
            self.producers[group].topics.add(topic)
        route = await self.update_route(topic, timeout=timeout)
        if route is not None:
            info = self.publish.get(topic) or publish_info(topic, route)
            self.publish[topic] = info
            if info.ok:
                return info
        fallback = await self.api.get_route(default_topic, timeout)
        if fallback is not None:
            _check_route_size(default_topic, fallback)
            self._learn_brokers(fallback)
            info = publish_info(topic, default_route(fallback, default_queue_nums), from_default=True)
            if info.ok:
                self.publish[topic] = info
                return info
        raise NoRouteError(await self.no_route_reason(topic, route, default_topic=default_topic))

    def refresh_soon(self, topic: str) -> None:
        """Fetch ``topic``'s route in the background (after a send failure)."""
        if self._running and self._nursery is not None:
            self._nursery.start_soon(self._refresh_quietly, topic)

    async def _refresh_quietly(self, topic: str) -> None:
        try:
            await self.update_route(topic)
        except ClientError as exc:
            log.debug("route refresh of %s failed: %s", topic, exc)

    def on_broker_closed(self, addr: str) -> None:
        """A connection to ``addr`` closed: when a broker we know, fetch again (in the
        background) the routes naming it, so that a dead master the name server dropped
        is left at once rather than at the next route poll (a consumer then pulls from
        its slave)."""
        names = {name for name, addrs in self.brokers.items() if addr in addrs.values()}
        if not names or not self._running:
            return
        for topic, route in list(self.routes.items()):
            if any(bd.broker_name in names for bd in route.broker_datas):
                self.refresh_soon(topic)

    def _interesting_topics(self) -> set[str]:
        topics = set(self.publish)
        for p in self.producers.values():
            topics |= p.topics
        for handle in self.consumers.values():
            topics.update(handle.subscribed_topics())
        return topics

    async def _route_loop(self) -> None:
        """``updateTopicRouteInfoFromNameServer`` every ``poll_namesrv_interval``."""
        while True:
            await trio.sleep(self.config.poll_namesrv_interval)
            for topic in sorted(self._interesting_topics()):
                await self._refresh_quietly(topic)
            self.clean_offline_brokers()

    def clean_offline_brokers(self) -> list[str]:
        """``cleanOfflineBroker``: forget brokers no cached route or publish info names
        any more (no heartbeats to them, no address for them). Returns the names dropped."""
        live = {bd.broker_name for route in self.routes.values() for bd in route.broker_datas}
        live.update(mq.broker_name for info in self.publish.values() for mq in info.queues)
        gone = [name for name in self.brokers if name not in live]
        for name in gone:
            del self.brokers[name]
        return gone

    # -- heartbeats ---------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            client_id=self.client_id,
            producers=[ProducerData(g) for g in self.producers],
            consumers=[h.consumer_data() for h in self.consumers.values()],
        )

    def heartbeat_now(self) -> None:
        """Ask for a heartbeat to every broker at once (``sendHeartbeatToAllBrokerWithLock``)."""
        self._heartbeat_soon.set()

    async def send_heartbeat(self) -> int:
        """A heartbeat to every master (to every broker when consumers are registered,
        as Java does); returns how many brokers answered."""
        if not self.producers and not self.consumers:
            return 0
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            ok = 0
            for addr in self._all_broker_addrs(masters_only=not self.consumers):
                try:
                    await self.api.heartbeat(addr, data)
                    ok += 1
                except ClientError as exc:
                    log.info("heartbeat to %s failed: %s", addr, exc)
            return ok

    async def _heartbeat_loop(self) -> None:
        while True:
            with trio.move_on_after(self.config.heartbeat_interval):
                await self._heartbeat_soon.wait()
            self._heartbeat_soon = trio.Event()
            await self.send_heartbeat()

    # -- broker -> client requests ------------------------------------------------------

    def _register_processors(self) -> None:
        reg = self.remoting.register_processor
        reg(int(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED), self._notify_consumer_ids_changed, inline=True)
        reg(int(RequestCode.GET_CONSUMER_RUNNING_INFO), self._get_consumer_running_info)
        reg(int(RequestCode.CONSUME_MESSAGE_DIRECTLY), self._consume_message_directly)
        reg(int(RequestCode.RESET_CONSUMER_CLIENT_OFFSET), self._reset_offset)
        reg(int(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT), self._get_consumer_status, inline=True)
        reg(int(RequestCode.CHECK_TRANSACTION_STATE), self._check_transaction_state, inline=True)
        reg(int(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT), self._push_reply, inline=True)

    def _handle_for(self, request: RemotingCommand, key: str = "consumerGroup") -> ConsumerHandle | None:
        group = (request.ext_fields or {}).get(key)
        return self.consumers.get(group) if group else None

    @staticmethod
    def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
        return request.make_response(int(ResponseCode.SYSTEM_ERROR), remark)

    def _no_group(self, request: RemotingCommand, key: str = "consumerGroup") -> RemotingCommand:
        group = (request.ext_fields or {}).get(key)
        return self._error(request, f"The Consumer Group <{group}> not exist in this consumer")

    def _notify_consumer_ids_changed(self, conn: Connection, request: RemotingCommand) -> None:
        handle = self._handle_for(request)
        if handle is not None:
            handle.on_consumer_ids_changed()
        return None  # oneway from the broker; Java answers nothing either

    async def _get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        handle = self._handle_for(request)
        if handle is None:
            return self._no_group(request)
        try:
            body = await handle.running_info()
        except NotImplementedError:
            return self._error(request, "GET_CONSUMER_RUNNING_INFO is not supported by this trocket consumer")
        return request.make_response(int(ResponseCode.SUCCESS), body=body)

    async def _consume_message_directly(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        handle = self._handle_for(request)
        if handle is None:
            return self._no_group(request)
        try:
            msg, _ = decode_record(request.body)
        except CodecError as exc:
            return self._error(request, f"the message does not decode: {exc}")
        try:
            body = await handle.consume_directly(msg, (request.ext_fields or {}).get("brokerName"))
        except NotImplementedError:
            return self._error(request, "CONSUME_MESSAGE_DIRECTLY is not supported by this trocket consumer")
        return request.make_response(int(ResponseCode.SUCCESS), body=body)

    def _get_consumer_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT (221, ``ClientRemotingProcessor.getConsumeStatus``)."""
        try:
            header = decode_header(GetConsumerStatusRequestHeader, request.ext_fields)
        except CodecError as exc:
            return self._error(request, f"RemotingCommandException: {exc}")
        handle = self.consumers.get(header.group)
        table = handle.offset_table(header.topic) if handle is not None else {}
        return request.make_response(int(ResponseCode.SUCCESS), body=GetConsumerStatusBody(table).to_body())

    def _check_transaction_state(self, conn: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (39, oneway): to the transaction producer of the half
        message's group (``PGROUP``), with the broker's address (``ClientRemotingProcessor``)."""
        try:
            header = decode_header(CheckTransactionStateRequestHeader, request.ext_fields)
            msg, _ = decode_record(request.body)
        except CodecError as exc:
            log.warning("a transaction check from %s does not decode: %s", conn.remote_address, exc)
            return None
        uniq = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            msg.transaction_id = uniq
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
        producer = self.producers.get(group) if group else None
        if producer is None or producer.handle is None:
            log.debug("transaction check for group %s: no transaction producer of it here", group)
            return None
        producer.handle.check_transaction_state(conn.peer or conn.remote_address, msg, header)
        return None

    def _push_reply(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply to one of this client's requests
        (``receiveReplyMessage``); SUCCESS even when nobody waits for it any more."""
        try:
            header = decode_header(ReplyMessageRequestHeader, request.ext_fields)
            reply = reply_from_push(header, request.body, time.time_ns() // 1_000_000)
        except (CodecError, zlib.error) as exc:
            log.warning("a reply from %s does not decode: %s", conn.remote_address, exc)
            return self._error(request, "process reply message fail")
        if not self.requests.deliver(reply):
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s , reply from host: %s",
                reply.properties.get("CORRELATION_ID"), header.bornHost,
            )
        return request.make_response(int(ResponseCode.SUCCESS))

    async def _reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        ext = request.ext_fields or {}
        handle = self.consumers.get(ext.get("group", ""))
        if handle is None:
            return None if request.is_oneway else self._no_group(request, "group")
        try:
            await handle.reset_offset(ext.get("topic", ""), int(ext.get("timestamp", "0") or 0), request.body)
        except NotImplementedError:
            return None if request.is_oneway else self._error(
                request, "RESET_CONSUMER_CLIENT_OFFSET is not supported by this trocket consumer"
            )
        return None if request.is_oneway else request.make_response(int(ResponseCode.SUCCESS))
