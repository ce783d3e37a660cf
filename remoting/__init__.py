"""RPC framework on trio mirroring RocketMQ's Netty remoting (see DESIGN.md).

Build a service: make a :class:`RemotingServer`, register processors for your own
request codes, serve; call it with a :class:`RemotingClient`. Nothing here knows
about topics or messages.
"""

from ._nursery import ServiceContextManager
from .client import RemotingClient, parse_address
from .config import ClientConfig, EndpointConfig, ServerConfig
from .connection import Connection, ConnectionOwner, call_after_read
from .endpoint import RemotingEndpoint
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
    ResponseCodeError,
)
from .events import ChannelEventListener
from .hooks import HookSet, RequestHook, RPCHook
from .invoker import Invoker, next_opaque
from .processor import ProcessorEntry, RequestProcessor
from .replies import PreparedResponse, SysResponseCode, error_reply, exception_simple_desc
from .response import ResponseFuture
from .server import RemotingServer
from .stats import RemotingStats
from .state import CloseReason, ConnectionStateError, ConnState
from .tap import FileTap, MemoryTap, TapSink
from .tls import TlsMode, client_ssl_context, server_ssl_context

__all__ = [
    "RemotingClient",
    "RemotingServer",
    "RemotingEndpoint",
    "ServiceContextManager",
    "Connection",
    "ConnectionOwner",
    "call_after_read",
    "ConnState",
    "CloseReason",
    "ConnectionStateError",
    "ClientConfig",
    "ServerConfig",
    "EndpointConfig",
    "ResponseFuture",
    "RequestProcessor",
    "ProcessorEntry",
    "RemotingStats",
    "Invoker",
    "PreparedResponse",
    "SysResponseCode",
    "error_reply",
    "exception_simple_desc",
    "next_opaque",
    "parse_address",
    "ChannelEventListener",
    "RPCHook",
    "RequestHook",
    "HookSet",
    "TapSink",
    "FileTap",
    "MemoryTap",
    "TlsMode",
    "server_ssl_context",
    "client_ssl_context",
    "ResponseCodeError",
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
