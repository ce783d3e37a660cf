"""Configuration of both endpoints: attrs classes with RocketMQ's defaults.

The numbers follow RocketMQ 4.9.8's ``NettyServerConfig`` / ``NettyClientConfig``
where they exist (permits, idle time, connect timeout, frame length); the rest
(processor limits, outbound bounds, shutdown deadline) are trocket's own, chosen so
that memory stays bounded however fast a peer sends.
"""

from __future__ import annotations

import attrs

from trocket.codecs.frame import DEFAULT_MAX_FRAME_LENGTH

from .tls import TlsMode

__all__ = ["EndpointConfig", "ServerConfig", "ClientConfig"]


def _positive(_inst, attr, value) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attr.name} must be positive, got {value!r}")


@attrs.define(slots=True, frozen=True, kw_only=True)
class EndpointConfig:
    """What both sides share.

    - ``async_permits`` / ``oneway_permits``: calls in flight at once (semaphores);
      past them a call waits up to its timeout, then fails with
      :class:`~trocket.remoting.errors.RemotingTooManyRequestsError`.
    - ``processor_limit`` / ``processor_queue``: defaults for registered processors:
      requests processed at once, and requests admitted to wait beyond that; past
      both the peer gets SYSTEM_BUSY at once.
    - ``max_frame_length``: larger frames close the connection (16 MiB, as RocketMQ).
    - ``idle_timeout``: seconds without reading or writing before the connection is
      closed (Netty's all-idle, 120 s); ``None`` disables.
    - ``scan_interval``: period of the response-table scan expiring calls nobody waits on.
    - ``outbound_max_frames`` / ``outbound_max_bytes``: bound of a connection's
      outbound queue; a producer (processor, caller, or the reader answering
      SYSTEM_BUSY) waits when it is full, which is backpressure onto the peer.
    - ``receive_size``: bytes asked of the socket per read.
    - ``flush_frames``: frames queued in one burst before they are written without
      waiting for the burst to end (16 measured best for pipelined calls here).
    - ``shutdown_deadline``: seconds in-flight processors get to finish on shutdown.
    - ``max_partial_bytes``: bytes all of the endpoint's connections may hold in frames
      they have begun and not finished (256 MiB); a read past it closes the connections
      holding the most, largest first, until the rest fits (no peer can make the
      endpoint buffer without bound by starting frames it never ends).
    - ``frame_timeout``: seconds a frame may take from its first byte to its last (30;
      ``None`` disables): a peer trickling a frame a byte at a time (slowloris) is
      closed, where the idle timeout alone would let one byte a second keep it open.
    - ``system_reply_ext_fields``: give the layer's own replies (SYSTEM_BUSY,
      SYSTEM_ERROR, REQUEST_CODE_NOT_SUPPORTED) an empty ext-fields object. RocketMQ's
      Java layer writes none, but the C++ client crashes on a response without one,
      so a broker serving it turns this on.
    """

    async_permits: int = attrs.field(default=65535, validator=_positive)
    oneway_permits: int = attrs.field(default=65535, validator=_positive)
    processor_limit: int = attrs.field(default=64, validator=_positive)
    processor_queue: int = attrs.field(default=1024, validator=attrs.validators.ge(0))
    max_frame_length: int = attrs.field(default=DEFAULT_MAX_FRAME_LENGTH, validator=_positive)
    idle_timeout: float | None = attrs.field(default=120.0, validator=_positive)
    scan_interval: float = attrs.field(default=1.0, validator=_positive)
    outbound_max_frames: int = attrs.field(default=4096, validator=_positive)
    outbound_max_bytes: int = attrs.field(default=8 * 1024 * 1024, validator=_positive)
    receive_size: int = attrs.field(default=256 * 1024, validator=_positive)
    #: a burst of queued frames this long is written at once rather than at the end
    #: of the burst, so the peer starts on it while this side produces the rest
    flush_frames: int = attrs.field(default=16, validator=_positive)
    shutdown_deadline: float = attrs.field(default=5.0, validator=attrs.validators.ge(0))
    #: TLS handshake (and, in permissive mode, first-byte) deadline, seconds.
    handshake_timeout: float = attrs.field(default=10.0, validator=_positive)
    max_partial_bytes: int = attrs.field(default=256 * 1024 * 1024, validator=_positive)
    frame_timeout: float | None = attrs.field(default=30.0, validator=_positive)
    system_reply_ext_fields: bool = False


@attrs.define(slots=True, frozen=True, kw_only=True)
class ServerConfig(EndpointConfig):
    """Server side: RocketMQ's ``serverAsyncSemaphoreValue`` 64 and
    ``serverOnewaySemaphoreValue`` 256 bound its calls to clients.

    ``listen_host`` is loopback unless you say otherwise: a server reachable from
    other machines is a choice (see ``docs/security.md``), not a default.
    ``max_connections``: connections served at once; one more is accepted and closed at
    once (logged at most once a second). ``max_connections_per_host``: the same for the
    connections from one host (one client machine cannot take every slot; logged at
    most once a minute per host)."""

    async_permits: int = attrs.field(default=64, validator=_positive)
    oneway_permits: int = attrs.field(default=256, validator=_positive)
    listen_host: str = "127.0.0.1"
    max_connections: int = attrs.field(default=10_000, validator=_positive)
    max_connections_per_host: int = attrs.field(default=1000, validator=_positive)
    listen_port: int = 8888
    tls_mode: TlsMode = TlsMode.DISABLED
    #: listen(2) backlog (RocketMQ's ``serverSocketBacklog`` is 1024).
    backlog: int = 1024


@attrs.define(slots=True, frozen=True, kw_only=True)
class ClientConfig(EndpointConfig):
    """Client side: RocketMQ's ``clientAsyncSemaphoreValue`` and
    ``clientOnewaySemaphoreValue`` are both 65535; ``connect_timeout`` 3 s."""

    connect_timeout: float = attrs.field(default=3.0, validator=_positive)
    #: timeout of invoke_* when the caller gives none (seconds).
    default_timeout: float = attrs.field(default=3.0, validator=_positive)
