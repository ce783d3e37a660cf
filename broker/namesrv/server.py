"""NameServer: the remoting server, the processors and the housekeeping of dead brokers.

::

    ns = NameServer(NamesrvConfig(listen_port=0))
    async with trio.open_nursery() as nursery:
        await nursery.start(ns.serve)        # listening; ns.address is "127.0.0.1:port"
        ...
        await ns.shutdown()

or ``async with NameServer(cfg) as ns: ...``. ``trocket namesrv`` runs one until a
signal with :func:`trocket.cli_broker.run_namesrv`.

Brokers register every 30 s; one silent for ``broker_expiry`` (120 s) is dropped by the
scan that runs every ``scan_interval`` (10 s), as ``NamesrvController``'s
``scanNotActiveBroker`` task. A broker whose connection closes is dropped at once
(``BrokerHousekeepingService``). The KV configuration (:mod:`.kv_config`) is kept in
``kv_config_path`` (``kvConfig.json``) when given, and the administration codes are
:mod:`.admin_processor`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import attrs
import trio

from trocket.remoting import (
    Channel,
    ChannelEventListener,
    RemotingServer,
    RequestHook,
    ServerConfig,
    ServiceContextManager,
    TlsSettings,
)

from .admin_processor import NamesrvAdminProcessor, NamesrvSettings
from .kv_config import KVConfigManager
from .processor import NamesrvProcessor
from .route_info import BROKER_CHANNEL_EXPIRED_TIME, RouteInfoManager

__all__ = ["NamesrvConfig", "NameServer", "BrokerHousekeeping"]

log = logging.getLogger(__name__)


def _positive(_inst: Any, attr: Any, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attr.name} must be positive, got {value!r}")


@attrs.define(slots=True, frozen=True, kw_only=True)
class NamesrvConfig:
    """The name server's settings (RocketMQ's ``NamesrvConfig``/``NettyServerConfig``).

    - ``listen_host``/``listen_port``: 127.0.0.1:9876 (port 0 picks a free one);
    - ``broker_expiry``: seconds without a registration before a broker is dropped
      (``BROKER_CHANNEL_EXPIRED_TIME``, 120 s);
    - ``scan_interval``: seconds between scans for such brokers (10 s);
    - ``enable_all_topic_list``: answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER (else
      SYSTEM_ERROR "disable");
    - ``idle_timeout``: seconds a connection may stay silent (Netty's 120 s), None = never;
    - ``tls``: Java's ``tls.server.*`` settings (disabled by default).
    - ``kv_config_path``: the KV configuration's file (Java's ``kvConfigPath``), None = kept
      in memory only; ``config_store_path``: where UPDATE_NAMESRV_CONFIG writes its
      changes (Java's ``configStorePath``), None = not written.
    """

    listen_host: str = "127.0.0.1"
    listen_port: int = attrs.field(default=9876, validator=attrs.validators.and_(attrs.validators.ge(0), attrs.validators.le(65535)))
    broker_expiry: float = attrs.field(default=BROKER_CHANNEL_EXPIRED_TIME, validator=_positive)
    scan_interval: float = attrs.field(default=10.0, validator=_positive)
    enable_all_topic_list: bool = True
    idle_timeout: float | None = 120.0
    tls: TlsSettings = attrs.field(factory=TlsSettings)
    kv_config_path: str | None = None
    config_store_path: str | None = None

    def server_config(self) -> ServerConfig:
        return ServerConfig(
            listen_host=self.listen_host, listen_port=self.listen_port, idle_timeout=self.idle_timeout,
            tls_mode=self.tls.server_mode,
        )


class BrokerHousekeeping(ChannelEventListener):
    """``BrokerHousekeepingService``: a connection that closes, fails or idles out takes
    the broker that registered over it with it."""

    def __init__(self, route_info: RouteInfoManager) -> None:
        self.route_info = route_info

    def on_channel_close(self, remote_addr: str, conn: Channel) -> None:
        self.route_info.on_channel_destroy(remote_addr, conn)

    def on_channel_exception(self, remote_addr: str, conn: Channel, error: BaseException) -> None:
        self.route_info.on_channel_destroy(remote_addr, conn)

    def on_channel_idle(self, remote_addr: str, conn: Channel) -> None:
        self.route_info.on_channel_destroy(remote_addr, conn)


class NameServer(ServiceContextManager):
    def __init__(self, config: NamesrvConfig | None = None, *, hooks: Iterable[RequestHook] = ()) -> None:
        self.config = config or NamesrvConfig()
        self.route_info = RouteInfoManager(broker_expiry=self.config.broker_expiry, clock=trio.current_time)
        self.kv = KVConfigManager(self.config.kv_config_path)
        self.kv.load()
        self.settings = NamesrvSettings(
            listen_port=self.config.listen_port, kv_config_path=self.config.kv_config_path,
            config_store_path=self.config.config_store_path,
        )
        self.processor = NamesrvProcessor(
            self.route_info, enable_all_topic_list=self.config.enable_all_topic_list, kv=self.kv, settings=self.settings,
        )
        self.remoting = RemotingServer(
            self.config.server_config(), listener=BrokerHousekeeping(self.route_info),
            ssl_context=self.config.tls.server_context(), hooks=hooks,
        )
        self.processor.register_on(self.remoting)
        NamesrvAdminProcessor(self.route_info, self.kv, self.settings).register_on(self.remoting)
        self._nursery: trio.Nursery | None = None
        self._done = trio.Event()

    @property
    def port(self) -> int:
        return self.remoting.port

    @property
    def address(self) -> str:
        """``host:port`` to give brokers and clients (``127.0.0.1`` for a wildcard bind)."""
        return self.remoting.address

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen, serve and scan until :meth:`shutdown` or cancellation."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.remoting.serve)
                self.settings.listen_port = self.port  # the real one (port 0 picks a free port)
                nursery.start_soon(self._scan_loop)
                log.info("name server listening on %s", self.address)
                task_status.started(self)
        finally:
            self._done.set()

    async def _scan_loop(self) -> None:
        interval = self.config.scan_interval
        while True:
            await trio.sleep(interval)
            dropped = self.route_info.scan_not_active()
            if dropped:
                log.info("scanNotActiveBroker dropped %s", ", ".join(dropped))

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight requests finish, close every connection."""
        if self._nursery is None:
            return
        await self.remoting.shutdown()
        self._nursery.cancel_scope.cancel()
        await self._done.wait()

    # the ServiceContextManager names (``async with name_server``)
    run = serve
    aclose = shutdown
