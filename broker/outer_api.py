"""BrokerOuterAPI: the broker's calls to its name servers (RocketMQ 4.9.8's ``BrokerOuterAPI``).

The broker controller registers with every name server at start-up, then every 30 s
(``registerNameServerPeriod``), and unregisters at shutdown::

    api = BrokerOuterAPI(remoting_client, "127.0.0.1:9876;10.0.0.2:9876")
    wrapper = topic_config_wrapper_of(topic_config_manager)   # all topics + data version
    results = await api.register_broker_all(
        "DefaultCluster", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912", wrapper)
    ...
    await api.unregister_broker_all("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)

``register_broker_all`` registers with all name servers concurrently and returns the
results of those that answered within the timeout; failures are logged, never raised
(as Java's). The name server re-reads a master's topic configs only when the data version
differs from the one it last saw, so bump the version whenever topics change (the store's
``TopicConfigManager`` does) and register again right away for a new topic (Java
registers at once, oneway, when a topic is created on send or send-back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, Union

import trio

from trocket.codecs.bodies.namesrv import (
    RegisterBrokerBody,
    RegisterBrokerResult,
    TopicConfigSerializeWrapper,
)
from trocket.codecs.codes import RequestCode, ResponseCode
from trocket.codecs.command import RemotingCommand
from trocket.codecs.custom_header import decode_header
from trocket.codecs.headers.namesrv import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from trocket.codecs.message.crc import body_crc

if TYPE_CHECKING:
    from trocket.remoting import RemotingClient

    from .store import TopicConfig

__all__ = [
    "BrokerOuterAPI",
    "BrokerOuterAPIError",
    "topic_config_wrapper_of",
    "parse_namesrv_addrs",
    "BROKER_VERSION",
    "REGISTER_BROKER_TIMEOUT",
    "REGISTER_NAMESRV_PERIOD",
]

log = logging.getLogger(__name__)

#: ``MQVersion.Version.V4_9_8.ordinal()``, the version a 4.9.8 broker sends. A name
#: server reads a RegisterBrokerBody (not a bare wrapper) from version 37 (V3_0_11) on.
BROKER_VERSION = 409
#: ``BrokerConfig.registerBrokerTimeoutMills``: 6 s.
REGISTER_BROKER_TIMEOUT = 6.0
#: ``BrokerConfig.registerNameServerPeriod``: 30 s.
REGISTER_NAMESRV_PERIOD = 30.0


class BrokerOuterAPIError(Exception):
    """A name server answered with an error code (Java's ``MQBrokerException``)."""

    def __init__(self, code: int, remark: str | None, addr: str) -> None:
        super().__init__(f"CODE: {code}  DESC: {remark}  BROKER: {addr}")
        self.code = code
        self.remark = remark
        self.addr = addr


def parse_namesrv_addrs(addrs: Iterable[str] | str | None) -> list[str]:
    """``"a:9876;b:9876"`` (Java's ``namesrvAddr``) or a list -> a list of addresses."""
    if addrs is None:
        return []
    if isinstance(addrs, str):
        addrs = addrs.split(";")
    return [a.strip() for a in addrs if a and a.strip()]


class TopicTable(Protocol):
    """What registration reads of a topic table (the store's ``TopicConfigManager``)."""

    data_version_counter: int
    data_version_timestamp: int

    def all(self) -> Mapping[str, TopicConfig]: ...


#: the topics a registration carries: a wrapper made already, or a table to make it from
TopicSource = Union[TopicConfigSerializeWrapper, TopicTable]


def topic_config_wrapper_of(source: TopicSource) -> TopicConfigSerializeWrapper:
    """``TopicConfigManager.buildTopicConfigSerializeWrapper()``: every topic config and
    the data version, from a :class:`TopicConfigSerializeWrapper` (returned as is) or a
    store ``TopicConfigManager`` (anything with ``all()``, ``data_version_counter`` and
    ``data_version_timestamp``)."""
    if isinstance(source, TopicConfigSerializeWrapper):
        return source
    return TopicConfigSerializeWrapper.of(
        source.all(), counter=int(source.data_version_counter), timestamp=int(source.data_version_timestamp)
    )


class BrokerOuterAPI:
    def __init__(self, remoting_client: RemotingClient, namesrv_addrs: Iterable[str] | str | None = None) -> None:
        self.remoting_client = remoting_client
        self._namesrv_addrs = parse_namesrv_addrs(namesrv_addrs)

    @property
    def namesrv_addrs(self) -> list[str]:
        return list(self._namesrv_addrs)

    # -- registration ------------------------------------------------------------------

    async def register_broker_all(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: TopicSource,
        timeout: float = REGISTER_BROKER_TIMEOUT,
        *,
        filter_server_list: Iterable[str] = (),
        oneway: bool = False,
        compressed: bool = False,
    ) -> list[RegisterBrokerResult]:
        """Register with every name server at once; the results of those that answered
        SUCCESS within ``timeout`` seconds (none for ``oneway``). Errors are logged."""
        addrs = list(self._namesrv_addrs)
        results: list[RegisterBrokerResult] = []
        if not addrs:
            return results
        wrapper = topic_config_wrapper_of(topic_config_wrapper)
        body = RegisterBrokerBody(wrapper, list(filter_server_list)).to_body(compressed)
        header = RegisterBrokerRequestHeader(
            brokerName=broker_name,
            brokerAddr=broker_addr,
            clusterName=cluster,
            haServerAddr=ha_server_addr,
            brokerId=broker_id,
            compressed=compressed,
            bodyCrc32=body_crc(body),
        )

        async def one(addr: str) -> None:
            try:
                result = await self.register_broker(addr, header, body, timeout, oneway=oneway)
            except Exception as exc:  # noqa: BLE001 - Java logs and goes on with the others
                log.warning("registerBroker to name server %s failed: %s", addr, exc)
                return
            if result is not None:
                results.append(result)
            log.debug("register broker[%d] to name server %s OK", broker_id, addr)

        with trio.move_on_after(timeout):
            async with trio.open_nursery() as nursery:
                for addr in addrs:
                    nursery.start_soon(one, addr)
        return results

    async def register_broker(
        self,
        namesrv_addr: str,
        header: RegisterBrokerRequestHeader,
        body: bytes,
        timeout: float = REGISTER_BROKER_TIMEOUT,
        *,
        oneway: bool = False,
    ) -> RegisterBrokerResult | None:
        """One REGISTER_BROKER; raises on a transport error or a non-SUCCESS answer."""
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body=body, version=BROKER_VERSION)
        if oneway:
            await self.remoting_client.invoke_oneway(namesrv_addr, request, timeout)
            return None
        response = await self.remoting_client.invoke_sync(namesrv_addr, request, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerOuterAPIError(response.code, response.remark, header.brokerAddr)
        rh = decode_header(RegisterBrokerResponseHeader, response.ext_fields)
        return RegisterBrokerResult.from_response(rh.haServerAddr, rh.masterAddr, response.body)

    async def unregister_broker_all(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout: float = 3.0,
    ) -> None:
        """Unregister from every name server (one after another, as Java); errors are logged."""
        for addr in list(self._namesrv_addrs):
            try:
                await self.unregister_broker(addr, cluster, broker_addr, broker_name, broker_id, timeout)
                log.info("unregisterBroker OK, NamesrvAddr: %s", addr)
            except Exception as exc:  # noqa: BLE001
                log.warning("unregisterBroker from name server %s failed: %s", addr, exc)

    async def unregister_broker(
        self,
        namesrv_addr: str,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        timeout: float = 3.0,
    ) -> None:
        header = UnregisterBrokerRequestHeader(
            brokerName=broker_name, brokerAddr=broker_addr, clusterName=cluster, brokerId=broker_id
        )
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header, version=BROKER_VERSION)
        response = await self.remoting_client.invoke_sync(namesrv_addr, request, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise BrokerOuterAPIError(response.code, response.remark, broker_addr)
