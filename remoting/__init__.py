"""RPC framework on trio mirroring RocketMQ's Netty remoting (see DESIGN.md).

Build a service: make a :class:`RemotingServer`, register processors for your own
request codes, serve; call it with a :class:`RemotingClient`. Nothing here knows
about topics or messages.
"""

from ._nursery import ServiceContextManager
from .client import RemotingClient, parse_address
from .config import ClientConfig, EndpointConfig, ServerConfig
from .connection import Connection, call_after_read
from .endpoint import RemotingEndpoint, RemotingStats, next_opaque
from .errors import (
    RemotingCancelledError,
    RemotingCommandDecodeError,
    RemotingConnectError,
    RemotingConnectionClosedError,
    RemotingDecodeError,
    RemotingError,
    RemotingFrameError,
    RemotingSendRequestError,
    RemotingShutdownError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from .events import ChannelEventListener
from .hooks import HmacSigningHook, HmacVerifyingHook, RPCHook, SignatureError
from .processor import RequestProcessor
from .replies import SysResponseCode, exception_simple_desc
from .response import ResponseFuture
from .server import RemotingServer
from .state import CloseReason, ConnectionStateError, ConnState
from .tap import FileTap, MemoryTap, TapSink
from .tls import TlsMode, client_ssl_context, server_ssl_context

__all__ = [
    "RemotingClient",
    "RemotingServer",
    "RemotingEndpoint",
    "ServiceContextManager",
    "Connection",
    "call_after_read",
    "ConnState",
    "CloseReason",
    "ConnectionStateError",
    "ClientConfig",
    "ServerConfig",
    "EndpointConfig",
    "ResponseFuture",
    "RequestProcessor",
    "RemotingStats",
    "SysResponseCode",
    "exception_simple_desc",
    "next_opaque",
    "parse_address",
    "ChannelEventListener",
    "RPCHook",
    "HmacSigningHook",
    "HmacVerifyingHook",
    "SignatureError",
    "TapSink",
    "FileTap",
    "MemoryTap",
    "TlsMode",
    "server_ssl_context",
    "client_ssl_context",
    "RemotingError",
    "RemotingConnectError",
    "RemotingSendRequestError",
    "RemotingConnectionClosedError",
    "RemotingShutdownError",
    "RemotingTimeoutError",
    "RemotingTooManyRequestsError",
    "RemotingCancelledError",
    "RemotingDecodeError",
    "RemotingFrameError",
    "RemotingCommandDecodeError",
]
