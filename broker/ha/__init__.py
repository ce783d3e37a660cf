"""Master-slave replication (RocketMQ 4.9's ``HAService``), in trio.

* :mod:`.protocol` -- the HA wire format (8-byte offsets up, 12-byte headers + commit-log
  bytes down), so a trocket slave can follow a Java master and the other way round;
* :mod:`.master` -- ``AcceptSocketService`` / ``HAConnection``: every slave, each streamed
  from its reported offset; a connection counts as a slave only once its first report
  is plausible;
* :mod:`.slave` -- ``HAClient``: appends at the same physical offsets, reconnects from
  its real end, stops when it is ahead of its master;
* :mod:`.transfer` -- ``GroupTransferService``: SYNC_MASTER sends handed over, never
  awaited by the send path, completed in order per acknowledgement;
* :mod:`.sync` -- ``SlaveSynchronize``: topics, consumer and delay offsets copied from
  the master with the admin codes.

:class:`HAService` puts them together for the controller, by role: a master runs the
transfer service and the HA server (on ``haListenPort``, by default the listen port + 1,
as Java's master: a slave can follow an ASYNC_MASTER without restarting it); a slave
runs the client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

import trio

from ..config import BrokerConfig
from ..store import MessageStore
from .master import HAServer
from .protocol import HAError, HAProtocolError, SlaveAheadError
from .slave import HAClient
from .transfer import GroupTransferService

if TYPE_CHECKING:
    from ..acl import AclValidator

__all__ = [
    "GroupTransferService",
    "HAClient",
    "HAError",
    "HAProtocolError",
    "HAServer",
    "HAService",
    "SlaveAheadError",
]

log = logging.getLogger(__name__)


class HAService:
    def __init__(
        self,
        config: BrokerConfig,
        store: MessageStore,
        *,
        on_fatal: Callable[[BaseException], None] | None = None,
        acl: AclValidator | None = None,
    ) -> None:
        self.config = config
        self.store = store
        heartbeat = config.ha_send_heartbeat_interval_ms / 1000.0
        housekeeping = config.ha_housekeeping_interval_ms / 1000.0
        self.transfer = GroupTransferService(
            timeout=config.sync_flush_timeout_ms / 1000.0, fallbehind_max=config.ha_slave_fallbehind_max
        )
        listen = config.ha_listen_addr()
        self.server: HAServer | None = None
        self.client: HAClient | None = None
        if listen is not None:
            self.server = HAServer(
                store, self.transfer, listen,
                batch_size=config.ha_transfer_batch_size, heartbeat=heartbeat, housekeeping=housekeeping,
                allowed=config.ha_allowed_slaves, acl=acl,
                ssl_context=self._server_tls(config),
                # an ASYNC_MASTER serves without replication when its implicit port is taken
                required=config.ha_listen is not None or config.is_sync_master,
            )
        if config.is_slave:
            self.client = HAClient(
                store, config.ha_master_address, heartbeat=heartbeat, housekeeping=housekeeping,
                max_record=config.max_message_size, on_fatal=on_fatal,
                ssl_context=config.tls.client_context_always() if config.ha_tls else None,
            )

    @staticmethod
    def _server_tls(config: BrokerConfig):
        """``haTlsEnable``: the HA port's context from the broker's ``tls.server.*`` certificate."""
        if not config.ha_tls:
            return None
        return config.tls.server_context_always()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if not self.config.is_slave:
                await nursery.start(self.transfer.run)
            if self.server is not None:
                await nursery.start(self.server.run)
            if self.client is not None:
                await nursery.start(self.client.run)
            task_status.started()

    def ha_server_addr(self, advertised_host: str) -> str:
        """``haServerAddr`` to register (``brokerIP2:haListenPort``); "" without a server."""
        if self.server is None or not self.server.port:
            return ""
        host = self.server.listen[0]
        if host in ("0.0.0.0", "::", ""):
            host = advertised_host
        return f"{host}:{self.server.port}"
