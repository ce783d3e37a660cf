"""BrokerController: everything a running broker is, started and stopped in order.

::

    async with BrokerController(BrokerConfig(listen=("127.0.0.1", 0), store_dir=tmp)) as controller:
        print(controller.broker_addr)           # recovered, listening, registered: "127.0.0.1:40123"
        ...
    # left: shut down cleanly (an exit by exception shuts down cleanly too)

or in a nursery of the caller's: ``await nursery.start(controller.run)``, stopped by
cancelling it or by :meth:`~BrokerController.request_shutdown` (``await
controller.aclose()`` asks and waits; ``controller.stopped`` is set once it is done).

Start-up (``run``); settings that are accepted but have no effect
(:meth:`~.config.BrokerConfig.ineffective_settings`) are logged as warnings first:

1. the embedded name server when ``config.namesrv_addrs`` is empty (its port known
   before the broker registers);
2. the store: ``MessageStore.open`` (recovery; in a worker thread), the topic,
   consumer-offset and subscription-group tables from ``<store>/config/``, then ``store.run`` (flushers), then
   the schedule service (delayed messages: ``delayOffset.json`` loaded, one delivery
   task per delay level, see :mod:`.schedule`; not delivering on a slave, whose store
   refuses puts), then replication (:class:`~.ha.HAService`: the transfer service and
   HA server of a master, the HA client of a slave);
3. the remoting server, the long-polling service (fed by the store's
   message-arriving listener), the outer API's client, and the typed
   :class:`~.context.BrokerContext` that processors get: it builds the client managers
   (``ConsumerManager``, ``ProducerManager``, ``RebalanceLockManager`` from
   :mod:`.client_manager`), makes its channel listener the server's (closed
   connections leave long polling and their client groups), and carries the hooks
   back here (``on_topic_created`` = :meth:`BrokerController.topic_created`,
   ``register_now`` = :meth:`BrokerController.register_broker_all`); then the
   transaction service (:mod:`.transaction`: its state rebuilt from the store, the
   check loop; neither on a slave);
4. every processor on the server (:mod:`.processors`): send, pull, admin, client
   management, offsets, locks, send-back, end-transaction, reply (request-reply); then
   the server listens, and so does its VIP channel on the listen port - 2 (Java's
   ``fastRemotingServer``: the same processors but PULL_MESSAGE, where a Java client with
   ``vipChannelEnabled`` sends and a Java slave copies its master's topics and offsets; a
   port that cannot be bound is logged and the broker serves without it);
5. registration with the name servers right away, then every
   ``register_interval_ms`` (30 s) and soon after a topic is created (at once, before
   answering, when a heartbeat or send-back creates a group's retry topic), with the
   HA server's address (``haServerAddr``) when this master runs one; a slave learns its
   master's broker and HA addresses from the answer (:mod:`.ha`);
6. periodic tasks: consumer offsets (and auto-created subscription groups) persisted every 5 s, retention checked every 10 s,
   client channels scanned for expiry every 10 s; on a slave, the master's tables
   copied every ``slave_sync_interval_ms`` (:mod:`.ha.sync`).

Shutdown (cancellation of ``run`` or :meth:`request_shutdown`), services still up
while it runs: stop the periodic tasks, unregister from the name servers, stop
accepting and let in-flight requests finish (a send waiting for its flush is
answered), persist offsets and topics, stop the services (the schedule service's
deliveries among them), ``store.shutdown()`` (flush, checkpoint, remove the abort file),
then write ``delayOffset.json`` (every delivery now flushed), stop the embedded name
server.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import ssl
import time
from typing import TYPE_CHECKING, Awaitable, Callable

import attrs
import trio

from trocket._version import version
from trocket.codecs.acl import AclSigningHook
from trocket.codecs.bodies.namesrv import RegisterBrokerResult, TopicConfigSerializeWrapper
from trocket.codecs.codes import RequestCode
from trocket.codecs.message.hosts import HostAddress
from trocket.remoting import ClientConfig, RemotingClient, RemotingServer, ServerConfig, ServiceContextManager, TlsMode

from .acl import AclValidator, NamesrvAclHook
from .acl.address import loopback_only
from .config import BrokerConfig, BrokerConfigError
from .context import BrokerContext
from .ha import HAService
from .ha.sync import SlaveSynchronize
from .long_polling import PullHoldService
from .namesrv.server import NamesrvConfig, NameServer
from .outer_api import BrokerOuterAPI, topic_config_wrapper_of
from .processors import acl as acl_admin
from .processors import admin, client, end_transaction, locks, offsets, pull, reply_message, send, send_back
from .processors import config as config_processor
from .processors import groups as groups_processor
from .processors import query as query_processor
from .processors import stats as stats_processor
from .processors.admin import AdminProcessor
from .processors.pull import PullProcessor
from .processors.send import SendProcessor
from .schedule import ScheduleMessageService
from .runtime_config import RuntimeConfig
from .snapshot import BrokerSnapshot, runtime_table, take_snapshot, take_snapshot_tables
from .stats import BrokerStatsService
from .store import ConsumerOffsetManager, MessageStore, SubscriptionGroupManager, TopicConfigManager
from .store.topic_config import PERM_READ, PERM_WRITE
from .transaction import TransactionalMessageService

if TYPE_CHECKING:
    from trocket.remoting.tap import TapSink

    from .metrics import MetricsEndpoint

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)

#: How long the shutdown gives the network parts (unregister, draining requests).
SHUTDOWN_NETWORK_DEADLINE = 10.0


class BrokerController(ServiceContextManager):
    """A broker: store, processors, long polling, name-server registration."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        *,
        namesrv_factory: Callable[[BrokerConfig], NameServer | None] | None = None,
        client_config: ClientConfig | None = None,
        server_config: ServerConfig | None = None,
        tap: TapSink | None = None,
    ) -> None:
        self.config = config or BrokerConfig()
        #: a capture sink (remoting's TapSink) for the broker's and the embedded name server's servers
        self.tap = tap
        #: builds the embedded name server (default: trocket.broker.namesrv's NameServer)
        self.namesrv_factory = namesrv_factory
        self.client_config = client_config or ClientConfig()
        self._server_config = server_config
        self.store: MessageStore | None = None
        self.topics: TopicConfigManager | None = None
        self.offsets: ConsumerOffsetManager | None = None
        self.subscriptions: SubscriptionGroupManager | None = None
        self.server: RemotingServer | None = None
        #: the VIP channel (listen port - 2), None when it could not listen
        self.vip_server: RemotingServer | None = None
        #: the Prometheus endpoint (``metrics_listen``), once started
        self.metrics: MetricsEndpoint | None = None
        self.client: RemotingClient | None = None
        self.namesrv: NameServer | None = None
        self.outer_api: BrokerOuterAPI | None = None
        self.ctx: BrokerContext | None = None
        self.pull_hold: PullHoldService | None = None
        self.schedule: ScheduleMessageService | None = None
        self.transactions: TransactionalMessageService | None = None
        self.send_processor: SendProcessor | None = None
        self.pull_processor: PullProcessor | None = None
        self.admin_processor: AdminProcessor | None = None
        self.ha: HAService | None = None
        #: the ACL check (``aclEnable``), None when off
        self.acl: AclValidator | None = None
        #: the statistics (broker/stats.py): TPS windows, daily totals, stats items
        self.stats: BrokerStatsService | None = None
        #: the configuration at runtime (broker/runtime_config.py: 25, 26)
        self.runtime_config: RuntimeConfig | None = None
        self.slave_sync: SlaveSynchronize | None = None
        #: the master's broker address a slave learned at registration (its sync target)
        self.master_addr: str | None = None
        #: what stopped the broker on its own (a slave ahead of its master)
        self.fatal: BaseException | None = None
        self.boot_timestamp = 0
        self.registrations = 0
        self.registration_failures = 0
        self._register_soon = trio.Event()
        self._wait_scope: trio.CancelScope | None = None
        #: a shutdown was requested (it may come while starting, before there is a wait to cancel)
        self._shutdown_requested = False
        self._services_scope: trio.CancelScope | None = None
        self._periodic_scope: trio.CancelScope | None = None
        self._services: trio.Nursery | None = None
        self._services_done = trio.Event()
        self._started = False
        self._running = False  # run() was called (it sets ``stopped`` however it ends)
        self.stopped = trio.Event()

    # -- addresses ----------------------------------------------------------------------

    @property
    def broker_addr(self) -> str:
        """The advertised ``host:port`` (routes and STOREHOST)."""
        return self.config.advertised_addr(self.server)

    @property
    def namesrv_addrs(self) -> list[str]:
        if self.config.namesrv_addrs:
            return list(self.config.namesrv_addrs)
        if self.namesrv is not None:
            return [self.namesrv.address]
        return self.config.namesrv_addr_list()

    # -- life -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[BrokerController] = trio.TASK_STATUS_IGNORED) -> None:
        """Start everything (see the module docstring), report started with the
        controller, serve until cancelled or :meth:`request_shutdown`, shut down cleanly."""
        self._running = True
        async with trio.open_nursery() as outer:
            await outer.start(self._services_host)
            try:
                await self._start()
                self._started = True
                task_status.started(self)
                with trio.CancelScope() as self._wait_scope:
                    # asked to stop while starting (a signal during boot; a slave ahead of
                    # its master): started, now shut down without serving on
                    if self._shutdown_requested:
                        self._wait_scope.cancel()
                    await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await self._shutdown()

    def _fatal(self, exc: BaseException) -> None:
        """Replication cannot go on (a slave ahead of its master): stop the broker."""
        self.fatal = exc
        self.request_shutdown()

    def request_shutdown(self) -> None:
        """Begin a clean shutdown; ``run`` returns once it is done. Asked while the
        broker is still starting, it shuts down as soon as it has started."""
        self._shutdown_requested = True
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    async def aclose(self) -> None:
        """:meth:`request_shutdown` and wait until the shutdown is done."""
        self.request_shutdown()
        if self._running:
            await self.stopped.wait()

    async def _services_host(self, *, task_status) -> None:
        # Services live under a shield: cancelling ``run`` must not tear them down
        # before the orderly shutdown has used them (unregister, drain, flush).
        try:
            with trio.CancelScope(shield=True) as scope:
                self._services_scope = scope
                async with trio.open_nursery() as nursery:
                    self._services = nursery
                    task_status.started()
                    await trio.sleep_forever()
        finally:
            self._services_done.set()

    async def _start(self) -> None:
        cfg = self.config
        services = self._services
        assert services is not None
        for key in cfg.ineffective_settings():
            log.warning("%s is accepted for compatibility and has no effect", key)
        server_ssl, client_ssl = self._check_security()

        # 1. the embedded name server
        if cfg.embedded_namesrv:
            self.namesrv = self._make_namesrv()
            if self.namesrv is not None:
                if self.acl is not None and self.namesrv_factory is None:
                    self.namesrv.remoting.register_rpc_hook(NamesrvAclHook(self.acl))
                if self.tap is not None:
                    self.namesrv.remoting.tap = self.tap
                await services.start(self.namesrv.serve)

        # 2. the store (recovery in a worker thread), topics, offsets
        host, port = cfg.listen
        adv = cfg.advertise
        store_host = HostAddress(*(adv if adv is not None else (self._advertise_host(host), port)))
        store_cfg = cfg.store_config((store_host.ip, store_host.port))
        t0 = time.monotonic()
        self.store = store = await trio.to_thread.run_sync(MessageStore.open, store_cfg)
        rec = store.recovery
        log.info(
            "store %s opened in %.2f s (max commit-log offset %d, recovery: %s)",
            os.path.abspath(cfg.store_dir), time.monotonic() - t0, store.max_phy_offset, rec,
        )
        self.topics = TopicConfigManager.open(
            store_cfg.config_dir,
            cluster_name=cfg.cluster,
            broker_name=cfg.broker_name,
            auto_create_topic_enable=cfg.auto_create_topic,
            default_topic_queue_nums=cfg.default_topic_queue_nums,
            trace_topic_enable=cfg.trace_topic_enable,
            trace_topic_name=cfg.msg_trace_topic_name,
        )
        self.offsets = ConsumerOffsetManager.open(store_cfg.config_dir)
        self.subscriptions = SubscriptionGroupManager.open(
            store_cfg.config_dir, auto_create=cfg.auto_create_subscription_group
        )
        store.set_slave(cfg.is_slave)
        await services.start(store.run)
        self.schedule = schedule = ScheduleMessageService(store, cfg)
        if not cfg.is_slave:  # a slave's schedule queues are replicated, never delivered
            await services.start(schedule.run)
        # replication: the transfer service, the HA server (master) or client (slave)
        self.ha = HAService(cfg, store, on_fatal=self._fatal, acl=self.acl)
        await services.start(self.ha.run)

        # 3. server, long polling, the context (with the client managers)
        server_cfg = self._server_config or ServerConfig(
            listen_host=host,
            listen_port=port,
            idle_timeout=cfg.channel_expired_timeout_ms / 1000.0,
            system_reply_ext_fields=True,  # the C++ client needs an extFields object in every reply
            tls_mode=cfg.tls.server_mode,
            max_connections_per_host=cfg.max_connections_per_host,
        )
        self.server = server = RemotingServer(
            server_cfg, tap=self.tap, ssl_context=server_ssl, hooks=[self.acl] if self.acl else (),
        )
        if self.acl is not None:
            await services.start(self.acl.watch, cfg.acl_reload_interval_ms / 1000.0)
        self.pull_hold = hold = PullHoldService(
            store,
            check_interval=(cfg.hold_check_interval_ms if cfg.long_polling else cfg.short_polling_time_ms) / 1000.0,
            max_held=cfg.max_held_pulls,
        )
        # the outer API (registration) and its client
        self.client = RemotingClient(self.client_config, ssl_context=client_ssl, hooks=self._signing_hooks())
        await services.start(self.client.run)
        self.outer_api = BrokerOuterAPI(self.client, self.namesrv_addrs)
        self.stats = stats = BrokerStatsService(store, cfg.cluster)
        self.ctx = ctx = BrokerContext(
            config=cfg, store=store, topics=self.topics, offsets=self.offsets, server=server, pull_hold=hold,
            schedule=schedule, outer_api=self.outer_api, ha=self.ha, stats=stats, subscriptions=self.subscriptions,
            on_topic_created=self.topic_created, register_now=self.register_broker_all,
        )
        ctx.channels.on_close.append(hold.drop_connection)
        await services.start(hold.run)
        # transactions: half messages, END_TRANSACTION, the check service (not on a slave)
        self.transactions = ctx.transactions = TransactionalMessageService(ctx)
        if not cfg.is_slave:
            await trio.to_thread.run_sync(self.transactions.load)
            await services.start(self.transactions.run)

        # 4. processors, and the statistics that read their counters
        self._register_processors(ctx)
        await services.start(stats.run)

        # listen (the real port is known now: patch STOREHOST for port 0), then the VIP channel
        await services.start(server.serve)
        if adv is None and port == 0:
            store.config.store_host = HostAddress(store_host.ip, server.port)
        await self._serve_vip_channel(services, server_cfg, ctx)
        self.boot_timestamp = int(time.time() * 1000)
        if cfg.metrics_listen is not None:
            await self._serve_metrics(services)

        # 5./6. registration and periodic tasks
        if cfg.is_slave:
            self.slave_sync = SlaveSynchronize(ctx, self.client, lambda: self.master_addr)
            # a topic is readable on the slave as soon as its records are: learnt from them,
            # not only from the master's table every slave_sync_interval_ms
            store.add_listener(self.slave_sync.learn_topic)
        await self.register_broker_all()
        services.start_soon(self._periodic_tasks)
        log.info(
            "The broker[%s, %s] boot success. serializeType=JSON and name server is %s",
            cfg.broker_name, self.broker_addr, ";".join(self.namesrv_addrs),
        )

    async def _serve_metrics(self, services: trio.Nursery) -> None:
        """Prometheus ``/metrics`` (broker/metrics.py): the broker's snapshot and, with an
        embedded name server, its figures too."""
        from .metrics import MetricsEndpoint, broker_families, namesrv_families, take_namesrv_figures

        namesrv = self.namesrv

        async def take():
            if self.ctx is None or self.stats is None:
                return None, None
            snap = await take_snapshot_tables(self.ctx, self.stats, boot_timestamp=self.boot_timestamp)
            return snap, take_namesrv_figures(namesrv) if namesrv is not None else None

        def families(pair) -> list:
            snap, ns = pair
            return (broker_families(snap) if snap is not None else []) + (namesrv_families(ns) if ns is not None else [])

        host, port = self.config.metrics_listen
        self.metrics = MetricsEndpoint(host, port, take, families)
        await services.start(self.metrics.run)

    @staticmethod
    def _advertise_host(host: str) -> str:
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host

    def _make_namesrv(self) -> NameServer | None:
        if self.namesrv_factory is not None:
            return self.namesrv_factory(self.config)
        host, port = self.config.namesrv_listen
        config_dir = os.path.join(self.config.store_dir, "config")  # its KV config beside the broker's tables
        return NameServer(NamesrvConfig(
            listen_host=host, listen_port=port, tls=self.config.tls,
            kv_config_path=os.path.join(config_dir, "kvConfig.json"),
            config_store_path=os.path.join(config_dir, "namesrv.properties"),
        ))

    def _signing_hooks(self) -> list[AclSigningHook]:
        """How the broker signs its own requests (registrations, a slave's sync): with
        ``accessKey``/``secretKey`` when given; else, with ACL on and an embedded name
        server, with an admin account made for this process (known to no file)."""
        cfg = self.config
        if cfg.access_key and cfg.secret_key:
            return [AclSigningHook(cfg.access_key, cfg.secret_key)]
        if self.acl is not None and cfg.embedded_namesrv:
            ak, sk = f"trocket-broker-{secrets.token_hex(8)}", secrets.token_urlsafe(24)
            self.acl.add_internal_account(ak, sk)
            return [AclSigningHook(ak, sk)]
        return []

    def _check_security(self) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
        """The ACL file loaded (``self.acl``) and the TLS contexts made (the server's, the
        client's), before anything starts: a bad ACL file, a missing or bad certificate
        stop the start with a :class:`BrokerConfigError` naming it, as Java's start fails."""
        cfg = self.config
        try:
            if cfg.acl_enable:
                self.acl = acl = AclValidator(cfg.acl_path())
                log.info("ACL on: %s (%d accounts, %d white-listed address patterns)",
                         acl.path, len(acl.table.accounts), len(acl.table.global_white))
            client_ssl = cfg.tls.client_context()
            if client_ssl is None and cfg.embedded_namesrv and cfg.tls.server_mode is TlsMode.ENFORCING:
                client_ssl = cfg.tls.client_context_always()  # its own name server speaks TLS only
            contexts = cfg.tls.server_context(), client_ssl
            if cfg.ha_tls:
                (cfg.tls.client_context_always if cfg.is_slave else cfg.tls.server_context_always)()
        except (ValueError, OSError) as exc:
            raise BrokerConfigError(str(exc)) from None
        ha = cfg.ha_listen_addr()
        if (cfg.acl_enable and not cfg.ha_allowed_slaves and ha is not None and not loopback_only(ha[0])
                and not self.acl.table.global_white):
            log.warning("ACL is on but the HA port (%s) serves any host that reaches it: list the slaves' hosts "
                        "in globalWhiteRemoteAddresses or haAllowedSlaves", ha[0] or "every interface")
        return contexts

    async def _serve_vip_channel(self, services: trio.Nursery, server_cfg: ServerConfig, ctx: BrokerContext) -> None:
        """Java's ``fastRemotingServer`` on the listen port - 2: the main server's
        processors but PULL_MESSAGE (the same registrations: their limits are shared),
        its hooks, channel listener and tap."""
        server = self.server
        assert server is not None
        vip_port = server.port - 2
        if vip_port <= 0:
            return
        vip = RemotingServer(
            attrs.evolve(server_cfg, listen_port=vip_port), hooks=server.hooks, tap=self.tap,
            ssl_context=server.ssl_context,
        )
        vip.processors = server.processors.view(exclude=(RequestCode.PULL_MESSAGE,))
        vip.listener = ctx.channels
        try:
            await services.start(vip.serve)
        except OSError as exc:
            log.warning("no VIP channel: cannot listen on %s:%d (%s)", server_cfg.listen_host, vip_port, exc)
            return
        self.vip_server = vip

    def _register_processors(self, ctx: BrokerContext) -> None:
        self.send_processor = send.register(ctx)
        self.pull_processor = pull.register(ctx)
        self.admin_processor = admin.register(ctx, runtime_info=self.runtime_info)
        client.register(ctx)
        send_back_processor = send_back.register(ctx)
        stats_processor.register(ctx)
        groups_processor.register(ctx)
        query_processor.register(ctx)
        self.runtime_config = RuntimeConfig(
            ctx, self.config.config_path or os.path.join(ctx.store.config.config_dir, "broker.properties"),
            send=self.send_processor, pull=self.pull_processor, register=self._register_soon_set,
        )
        config_processor.register(ctx, self.runtime_config)
        if ctx.stats is not None:
            ctx.stats.send = self.send_processor
            ctx.stats.pull = self.pull_processor
            ctx.stats.send_back = send_back_processor
        offsets.register(ctx)
        locks.register(ctx)
        end_transaction.register(ctx)
        reply_message.register(ctx, self.send_processor)
        acl_admin.register(ctx, self.acl, lambda: self.broker_addr)

    # -- name servers ------------------------------------------------------------------------

    def topic_created(self, topic: str) -> None:
        """A topic was created or changed: register again soon (Java registers at once)."""
        self._register_soon.set()

    def _register_soon_set(self) -> None:
        """Register again soon with a new data version (the broker's permission changed:
        the name servers take the topics' masked permissions only from a new version)."""
        if self.topics is not None:
            self.topics.next_data_version()
        self._register_soon.set()

    async def register_broker_all(self, *, oneway: bool = False) -> list[RegisterBrokerResult]:
        api = self.outer_api
        if api is None or self.topics is None:
            return []
        cfg = self.config
        addr = self.broker_addr
        try:
            ha_addr = self.ha.ha_server_addr(addr.rpartition(":")[0]) if self.ha is not None else ""
            results = await api.register_broker_all(
                cfg.cluster, addr, cfg.broker_name, cfg.broker_id, ha_addr, self._registered_topics(),
                cfg.register_timeout_ms / 1000.0, oneway=oneway,
            )
        except Exception:
            self.registration_failures += 1
            log.exception("registering with name servers %s failed", self.namesrv_addrs)
            return []
        self.registrations += 1
        if cfg.is_slave:
            self._learn_master(results)
        if not oneway and not results and self.namesrv_addrs:
            self.registration_failures += 1
            log.warning("no name server of %s accepted the registration", self.namesrv_addrs)
        return results

    def _registered_topics(self) -> TopicConfigManager | TopicConfigSerializeWrapper:
        """The topics to register: the table, or with a broker permission short of
        read + write each topic's permission masked by it (Java's ``registerBrokerAll``)."""
        topics = self.topics
        assert topics is not None
        perm = self.config.broker_permission
        if perm & PERM_READ and perm & PERM_WRITE:
            return topics
        wrapper = topic_config_wrapper_of(topics)
        for tc in wrapper.topic_config_table.values():
            tc.perm &= perm
        return wrapper

    def _learn_master(self, results: list[RegisterBrokerResult]) -> None:
        """A slave's registration answer names the master and its HA address (Java's
        ``updateMasterHAServerAddrPeriodically`` / ``SlaveSynchronize.setMasterAddr``)."""
        for result in results:
            if result.master_addr:
                self.master_addr = result.master_addr
            if result.ha_server_addr and self.config.ha_master_address is None and self.ha is not None:
                client = self.ha.client
                if client is not None:
                    host, _, port = result.ha_server_addr.rpartition(":")
                    try:
                        client.set_master((host, int(port)))
                    except ValueError:
                        log.warning("bad haServerAddr %r from the name server", result.ha_server_addr)

    async def _unregister(self) -> None:
        api = self.outer_api
        if api is None:
            return
        cfg = self.config
        try:
            await api.unregister_broker_all(cfg.cluster, self.broker_addr, cfg.broker_name, cfg.broker_id)
        except Exception:
            log.exception("unregistering from name servers failed")

    # -- periodic tasks -----------------------------------------------------------------------

    async def _periodic_tasks(self) -> None:
        with trio.CancelScope() as self._periodic_scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._register_loop)
                nursery.start_soon(self._every, self.config.flush_consumer_offset_interval_ms, self._persist_offsets)
                nursery.start_soon(self._every, self.config.clean_resource_interval_ms, self._retention)
                if self.ctx is not None:
                    nursery.start_soon(client.run_housekeeping, self.ctx)
                if self.slave_sync is not None:
                    nursery.start_soon(self.slave_sync.run, self.config.slave_sync_interval_ms / 1000.0)

    async def _register_loop(self) -> None:
        interval = self.config.register_interval_ms / 1000.0
        next_at = trio.current_time() + interval
        while True:
            with trio.move_on_at(next_at):
                await self._register_soon.wait()
                await trio.sleep(0.05)  # coalesce a burst of topic creations
            self._register_soon = trio.Event()
            await self.register_broker_all()
            if trio.current_time() >= next_at:
                next_at = trio.current_time() + interval

    @staticmethod
    async def _every(interval_ms: int, fn: Callable[[], Awaitable[object]]) -> None:
        interval = interval_ms / 1000.0
        while True:
            await trio.sleep(interval)
            try:
                await fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def _persist_offsets(self) -> None:
        offsets = self.offsets
        if offsets is not None and offsets.dirty:
            await trio.to_thread.run_sync(offsets.persist)
        groups = self.subscriptions  # groups auto-created by pulls and heartbeats
        if groups is not None and groups.dirty:
            await trio.to_thread.run_sync(groups.persist)

    async def _retention(self) -> None:
        store = self.store
        if store is None or store.closed:
            return
        result = await trio.to_thread.run_sync(store.delete_expired)
        if result.commit_log_segments or result.consume_queue_files:
            log.info(
                "retention (%s): deleted %d commit-log segments, %d consume-queue files",
                result.reason, result.commit_log_segments, result.consume_queue_files,
            )

    # -- shutdown ---------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        log.info("broker %s shutting down", self.config.broker_name)
        try:
            if self._periodic_scope is not None:
                self._periodic_scope.cancel()
            with trio.move_on_after(SHUTDOWN_NETWORK_DEADLINE):
                if self._started:
                    await self._unregister()
                if self.vip_server is not None:
                    await self.vip_server.shutdown()
                if self.server is not None:
                    await self.server.shutdown()
        finally:
            try:
                if self.offsets is not None:
                    await trio.to_thread.run_sync(self.offsets.persist)
                if self.topics is not None:
                    await trio.to_thread.run_sync(self.topics.persist)
                if self.subscriptions is not None and self.subscriptions.dirty:
                    await trio.to_thread.run_sync(self.subscriptions.persist)
            except Exception:
                log.exception("persisting offsets/topics at shutdown failed")
            # stop the services (flushers, long polling, client, name server) ...
            if self.namesrv is not None and self._started:
                with trio.move_on_after(3):
                    try:
                        await self.namesrv.shutdown()
                    except Exception:
                        log.exception("name server shutdown failed")
            if self._services_scope is not None:
                self._services_scope.cancel()
            await self._services_done.wait()
            # ... then close the store (final flush, checkpoint, abort file removed)
            if self.store is not None:
                await trio.to_thread.run_sync(self.store.shutdown)
            if self.schedule is not None:
                try:
                    await trio.to_thread.run_sync(lambda: self.schedule.persist(durable_only=False))
                except Exception:
                    log.exception("persisting delayOffset.json at shutdown failed")
            self.stopped.set()
            log.info("broker %s shut down cleanly", self.config.broker_name)

    # -- runtime info ------------------------------------------------------------------------

    def snapshot(self, *, tables: bool = False) -> BrokerSnapshot | None:
        """Every figure of the broker now (:mod:`.snapshot`), None before it started;
        ``tables``: with the per-topic and per-group figures (the metrics endpoint's)."""
        if self.ctx is None or self.stats is None:
            return None
        return take_snapshot(self.ctx, self.stats, boot_timestamp=self.boot_timestamp, tables=tables)

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table: the snapshot in Java's keys and formats."""
        snap = self.snapshot()
        return runtime_table(snap) if snap is not None else {}
