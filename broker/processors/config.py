"""The broker's configuration: GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25 (RocketMQ
4.9.8's ``AdminBrokerProcessor.getBrokerConfig`` / ``updateBrokerConfig``; the rules are
:mod:`trocket.broker.runtime_config`'s).

* 26: the body is every key as ``key=value`` lines, the ``version`` header the
  configuration's data version as JSON.
* 25: the body's ``key=value`` lines; SUCCESS once applied and written to the config
  file; NO_PERMISSION for a key that cannot change while the broker runs (Java's
  black-list answer, with a remark naming the keys that can); SYSTEM_ERROR naming the
  key for an unknown key or a bad value (nothing changed either way).

Both run as tasks (``admin_concurrency`` at once).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.headers import GetBrokerConfigResponseHeader
from trocket.remoting import Connection

from ..config import BrokerConfigError
from ..errors import BrokerError, NoPermissionError
from ..runtime_config import ConfigRefusedError, properties_text
from . import reply

if TYPE_CHECKING:
    from ..context import BrokerContext
    from ..runtime_config import RuntimeConfig

__all__ = ["ConfigProcessor", "register"]

log = logging.getLogger(__name__)


class ConfigProcessor:
    """26 and 25 over the broker's :class:`~trocket.broker.runtime_config.RuntimeConfig`."""

    def __init__(self, ctx: BrokerContext, runtime: RuntimeConfig) -> None:
        self.ctx = ctx
        self.runtime = runtime
        self._lock = trio.Lock()  # Java's updateBrokerConfig is synchronized

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_BROKER_CONFIG:
            return self.get_broker_config()
        return await self.update_broker_config(conn, request)

    def get_broker_config(self) -> RemotingCommand:
        body = properties_text(self.runtime.properties()).encode("utf-8")
        return reply(ResponseCode.SUCCESS, body=body,
                     header=GetBrokerConfigResponseHeader(version=self.runtime.version_json()))

    async def update_broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        log.info("updateBrokerConfig called by %s", conn.remote_address)
        try:
            text = (request.body or b"").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BrokerError(f"the properties are not UTF-8: {exc}") from None
        async with self._lock:
            try:
                changed = self.runtime.update(text)
            except ConfigRefusedError as exc:
                raise NoPermissionError(str(exc)) from None
            except BrokerConfigError as exc:
                raise BrokerError(str(exc)) from None
            await trio.to_thread.run_sync(self.runtime.persist, changed)
        return reply(ResponseCode.SUCCESS)


def register(ctx: BrokerContext, runtime: RuntimeConfig) -> ConfigProcessor:
    proc = ConfigProcessor(ctx, runtime)
    for code in (RequestCode.GET_BROKER_CONFIG, RequestCode.UPDATE_BROKER_CONFIG):
        ctx.server.register_processor(int(code), proc, limit=ctx.config.admin_concurrency, queue=1024)
    return proc
