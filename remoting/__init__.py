"""RPC framework on trio mirroring RocketMQ's Netty remoting (see DESIGN.md).

Build a service: make a :class:`RemotingServer`, register processors for your own
request codes, serve; call it with a :class:`RemotingClient`. Or typed: declare each
call as a :class:`Method` of custom-header classes, serve it with a :class:`Service`'s
handlers, call it through a :class:`Stub`, with errors that are :class:`ServiceError`
classes (docs/remoting.md). Nothing here knows about topics or messages.
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
from .events import Channel, ChannelEventListener
from .hooks import HookSet, RequestHook, RPCHook
from .invoker import Invoker, next_opaque
from .processor import ProcessorEntry, RequestProcessor
from .replies import PreparedResponse, SysResponseCode, error_reply, exception_simple_desc
from .response import ResponseFuture
from .rpc import (
    Method,
    RemoteBusyError,
    RemoteSystemError,
    Reply,
    RequestCodeNotSupportedError,
    ServiceError,
)
from .server import RemotingServer
from .service import Service
from .stats import RemotingStats
from .state import CloseReason, ConnectionStateError, ConnState
from .stub import Call, ReplyFuture, Stub
from .tap import FileTap, MemoryTap, TapSink
from .tls import TlsMode, TlsSettings, client_ssl_context, server_ssl_context

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
    "Channel",
    "RPCHook",
    "RequestHook",
    "HookSet",
    "TapSink",
    "FileTap",
    "MemoryTap",
    "TlsMode",
    "TlsSettings",
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
    # typed services
    "Method",
    "Reply",
    "Service",
    "Stub",
    "Call",
    "ReplyFuture",
    "ServiceError",
    "RemoteSystemError",
    "RemoteBusyError",
    "RequestCodeNotSupportedError",
]
