"""ClientConfig: what every producer and consumer of one process shares (Java's ``ClientConfig``).

Defaults are RocketMQ 4.9.8's: heartbeat every 30 s (``heartbeatBrokerInterval``), route
poll every 30 s (``pollNameServerInterval``), consumer offsets persisted every 5 s
(``persistConsumerOffsetInterval``), 3 s per remote call (``mqClientApiTimeout``).

The client id is built as ``MQClientInstance`` / ``ClientConfig.buildMQClientId`` builds it:
``ip@instanceName`` plus ``@unitName`` when a unit name is set. An instance name of
``DEFAULT`` is replaced by ``pid#nanotime`` (``changeInstanceNameToPID``), so two processes
on one host never share a client id.
"""

from __future__ import annotations

import os
import socket
import time

import attrs

from trocket.codecs.command import LanguageCode, SerializeType
from trocket.remoting.tls import TlsSettings

__all__ = ["ClientConfig", "parse_namesrv", "local_ip", "MQ_VERSION", "credentials_from_env", "tls_from_env"]

#: ``MQVersion.CURRENT_VERSION`` of 4.9.8 (V4_9_8), sent as every request's version.
MQ_VERSION = 409


def parse_namesrv(addrs: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"a:p;b:p"`` (Java's ``namesrvAddr``) or a list -> a tuple of ``host:port``.

    Raises ``ValueError`` for an empty list or an entry that is not ``host:port``.
    """
    items = addrs.split(";") if isinstance(addrs, str) else list(addrs)
    out: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"name server address {item!r} is not host:port")
        out.append(item)
    if not out:
        raise ValueError(f"no name server address in {addrs!r}")
    return tuple(out)


def local_ip() -> str:
    """``RemotingUtil.getLocalAddress``'s spirit: the address this host reaches others with
    (a UDP connect sends nothing), else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"


def _default_instance() -> str:
    return os.environ.get("rocketmq.client.name", "DEFAULT")


@attrs.define(slots=True, kw_only=True)
class ClientConfig:
    """Options of a :class:`~trocket.client.instance.ClientInstance` (times in seconds)."""

    namesrv: tuple[str, ...] = attrs.field(converter=parse_namesrv)
    instance_name: str = attrs.field(factory=_default_instance)
    client_ip: str = attrs.field(factory=local_ip)
    unit_name: str | None = None
    unit_mode: bool = False
    #: one remote call (name server or broker) when the caller gives no budget of its own
    call_timeout: float = 3.0
    heartbeat_interval: float = 30.0
    poll_namesrv_interval: float = 30.0
    persist_offset_interval: float = 5.0
    #: the remoting layer's connect timeout (Java's ``connectTimeoutMillis``)
    connect_timeout: float = 3.0
    #: header serialization of requests; ROCKETMQ binary is what the broker decodes fastest,
    #: JSON is Java's default (``rocketmq.serialize.type``)
    serialize_type: SerializeType = SerializeType.ROCKETMQ
    language: LanguageCode = LanguageCode.PYTHON
    #: sends and the broker calls Java sends there go to each broker's VIP channel, its
    #: listen port - 2 (``vipChannelEnabled`` / ``sendMessageWithVIPChannel``; off, as 4.9.8)
    vip_channel_enabled: bool = False
    #: async calls in flight per instance (``clientAsyncSemaphoreValue``)
    async_permits: int = 65535
    oneway_permits: int = 65535
    # -- security (docs/security.md) --
    #: ACL credentials: every request is signed (Java's ``AclClientRPCHook``) when both
    #: are given; :func:`credentials_from_env` reads ``ROCKETMQ_ACCESS_KEY`` /
    #: ``ROCKETMQ_SECRET_KEY``
    access_key: str | None = None
    secret_key: str | None = attrs.field(default=None, repr=False)
    #: Java's client TLS settings (``tls.enable``, ``tls.client.*``)
    tls: TlsSettings = attrs.field(factory=TlsSettings)

    def __attrs_post_init__(self) -> None:
        if self.instance_name == "DEFAULT":
            self.instance_name = f"{os.getpid()}#{time.monotonic_ns()}"

    @property
    def client_id(self) -> str:
        """``buildMQClientId``: ``ip@instance`` (``@unit`` when a unit name is set)."""
        cid = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid


def credentials_from_env(environ: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """``(ROCKETMQ_ACCESS_KEY, ROCKETMQ_SECRET_KEY)`` from the environment (None when unset)."""
    env = os.environ if environ is None else environ
    return env.get("ROCKETMQ_ACCESS_KEY") or None, env.get("ROCKETMQ_SECRET_KEY") or None


def tls_from_env(environ: dict[str, str] | None = None) -> TlsSettings:
    """``ROCKETMQ_TLS_ENABLE=true`` (Java's ``tls.enable``) and ``ROCKETMQ_TLS_CONFIG_FILE``
    (Java's ``tls.config.file``: ``tls.client.*`` keys) from the environment."""
    env = os.environ if environ is None else environ
    props = {}
    if env.get("ROCKETMQ_TLS_ENABLE"):
        props["tls.enable"] = env["ROCKETMQ_TLS_ENABLE"]
    if env.get("ROCKETMQ_TLS_CONFIG_FILE"):
        props["tls.config.file"] = env["ROCKETMQ_TLS_CONFIG_FILE"]
    return TlsSettings.from_properties(props)
