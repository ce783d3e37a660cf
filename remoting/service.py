"""The server side of a typed service: handlers for :class:`~.rpc.Method` s, registered
on any endpoint as remoting processors.

::

    service = Service()

    @service.handler(PUT, inline=True)
    def put(header: PutRequestHeader, body: bytes) -> PutResponseHeader:
        ...
        return PutResponseHeader(version=3)

    service.register(server)          # a RemotingServer (or a RemotingClient: both answer)

A handler takes the decoded request header (``None`` for a method without one) and
the body, plus the connection's :class:`~.events.Channel` when registered with
``channel=True``, and returns one of: the response header, a :class:`~.rpc.Reply`
(header and body), or ``None`` for a method whose response has no header. A
:class:`~.rpc.ServiceError` it raises is answered with its code and remark, as remoting
answers every :class:`~.errors.ResponseCodeError`; anything else it raises, and a
request header that does not decode, is answered as remoting answers a failed processor
(SYSTEM_ERROR, with the error's description).

Handlers are processors (:mod:`.processor`), with the same kinds and limits: an
``async def`` runs in its own task under ``limit``/``queue`` (past both: SYSTEM_BUSY);
a plain function runs in a worker thread under the same limits, or, with
``inline=True`` (it never blocks), on the connection's reader. A oneway method's
handler is called the same way; what it returns is not sent.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trocket.codecs.command import RPC_RESPONSE, LanguageCode, RemotingCommand, SerializeType, build_command

from .processor import Processor
from .rpc import Method, Reply

if TYPE_CHECKING:
    from .connection import Connection
    from .endpoint import RemotingEndpoint

__all__ = ["Service", "Handler"]

_JAVA = LanguageCode.JAVA
_JSON = SerializeType.JSON

Handler = Callable[..., Any]


class Service:
    """A table of handlers, one per :class:`~.rpc.Method` (request code)."""

    def __init__(self) -> None:
        #: code -> (method, processor, limit, queue, inline)
        self._entries: dict[int, tuple[Method, Processor, int | None, int | None, bool]] = {}

    def handler(
        self,
        method: Method,
        *,
        inline: bool = False,
        limit: int | None = None,
        queue: int | None = None,
        channel: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Decorator: serve ``method`` with the decorated function (see the module docs).
        ``inline``, ``limit``, ``queue``: as :meth:`RemotingEndpoint.register_processor
        <trocket.remoting.endpoint.RemotingEndpoint.register_processor>`."""

        def register(fn: Handler) -> Handler:
            self.add(method, fn, inline=inline, limit=limit, queue=queue, channel=channel)
            return fn

        return register

    def add(
        self,
        method: Method,
        fn: Handler,
        *,
        inline: bool = False,
        limit: int | None = None,
        queue: int | None = None,
        channel: bool = False,
    ) -> None:
        """:meth:`handler` without the decorator (a table of handlers, built in a loop)."""
        if not isinstance(method, Method):
            raise TypeError(f"handler() takes a Method, not {method!r}")
        if method.code in self._entries:
            raise ValueError(f"request code {method.code} already has a handler ({self._entries[method.code][0]!r})")
        processor = _processor(method, fn, channel)
        if inline and inspect.iscoroutinefunction(fn):
            raise ValueError("inline handlers are plain functions that never block, not async ones")
        self._entries[method.code] = (method, processor, limit, queue, inline)

    @property
    def methods(self) -> list[Method]:
        return [entry[0] for entry in self._entries.values()]

    def register(self, endpoint: RemotingEndpoint) -> None:
        """Register every handler on ``endpoint`` (a RemotingServer or RemotingClient)."""
        for code, (_, processor, limit, queue, inline) in self._entries.items():
            endpoint.register_processor(code, processor, limit=limit, queue=queue, inline=inline)


def _processor(method: Method, fn: Handler, channel: bool) -> Processor:
    """The remoting processor serving ``method`` with ``fn``: decode, call, answer.

    Written out per shape (sync or async, with or without the channel) so the hot path
    is one call with no per-request branching on the shape. What ``fn`` raises goes to
    remoting, which answers it (a ServiceError with its code)."""
    decode = method.decode_request
    answer = _answerer(method)
    if inspect.iscoroutinefunction(fn):
        if channel:

            async def process_async_channel(conn: Connection, request: RemotingCommand) -> RemotingCommand:
                return answer(await fn(None if decode is None else decode(request.ext_fields), request.body, conn))

            return process_async_channel

        async def process_async(conn: Connection, request: RemotingCommand) -> RemotingCommand:
            return answer(await fn(None if decode is None else decode(request.ext_fields), request.body))

        return process_async
    if channel:

        def process_channel(conn: Connection, request: RemotingCommand) -> RemotingCommand:
            return answer(fn(None if decode is None else decode(request.ext_fields), request.body, conn))

        return process_channel

    cls = method.response

    def process(conn: Connection, request: RemotingCommand) -> RemotingCommand:
        # the hot shape (an inline handler's): answer() written out, a Python call less per request
        result = fn(None if decode is None else decode(request.ext_fields), request.body)
        header, body = (result.header, result.body) if result.__class__ is Reply else (result, b"")
        if (header.__class__ is not cls) if cls is not None else (header is not None):
            raise _wrong_answer(method, result)
        return build_command(RemotingCommand, 0, _JAVA, 0, 0, RPC_RESPONSE, None, None, body, header, _JSON)

    return process


def _answerer(method: Method) -> Callable[[Any], RemotingCommand]:
    """What turns a handler's result into the SUCCESS response, checking its type."""
    cls = method.response

    def answer(result: Any) -> RemotingCommand:
        header, body = (result.header, result.body) if result.__class__ is Reply else (result, b"")
        if (header.__class__ is not cls) if cls is not None else (header is not None):
            raise _wrong_answer(method, result)
        return build_command(RemotingCommand, 0, _JAVA, 0, 0, RPC_RESPONSE, None, None, body, header, _JSON)

    return answer


def _wrong_answer(method: Method, result: Any) -> TypeError:
    """The error for a handler's result that is not its method's response header (or a
    Reply with one)."""
    if method.response is None:
        expected = "it takes None, or a Reply with no header"
    else:
        name = method.response.__name__
        expected = f"it takes a {name}, or a Reply with a {name}"
    return TypeError(f"the handler of {method!r} answered {result!r}: {expected}")
