"""The calling side of a typed service: a :class:`Stub` declares the service's methods
and errors once; its instances make typed calls.

::

    class KVStub(Stub):
        errors = (NotFound,)
        get = GET                      # Method(1, request=GetRequestHeader, response=...)
        put = PUT

    stub = KVStub(client, "127.0.0.1:9000", timeout=3)
    reply = await stub.get(GetRequestHeader(key="k"))            # sync: a Reply
    future = await stub.put.invoke_async(PutRequestHeader(key="k"), b"v")
    reply = await future                                         # later
    await stub.put.invoke_oneway(PutRequestHeader(key="k"), b"v")

Calling a method waits for its answer (``invoke_sync``), or sends it oneway when the
method is declared ``oneway=True``. The answer comes back as a :class:`~.rpc.Reply`
with the decoded response header; an error answer raises the stub's error class for
its code (:func:`~.rpc.error_for`), and remoting's errors (timeout, connect, too many
requests, closed connection) are raised as they are.

``timeout`` is one budget for the whole call: connecting (the first call to an
address), waiting for a permit, sending and waiting for the answer, as remoting's
``invoke_*`` count it. A stub calls
either a server at an address through a :class:`~.client.RemotingClient`, or the
client at the other end of a connection through the :class:`~.server.RemotingServer`
that accepted it (``KVNotices(server, conn)``: servers push to their clients).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NoReturn, TypeVar

from trocket.codecs.command import LanguageCode, RemotingCommand, SerializeType, build_command

from .response import ResponseFuture
from .rpc import Method, Reply, ServiceError, error_for, error_table

if TYPE_CHECKING:
    from .connection import Connection
    from .endpoint import RemotingEndpoint

__all__ = ["Stub", "Call", "ReplyFuture"]

Req = TypeVar("Req")
Resp = TypeVar("Resp")

_JAVA = LanguageCode.JAVA


def _reply(decode: Callable[[Any], Any] | None, errors: dict[int, type[ServiceError]], response: RemotingCommand) -> Reply[Any]:
    """The :class:`~.rpc.Reply` of a SUCCESS ``response`` (``decode`` its header), else
    raise the error for its code from ``errors``."""
    if response.code == 0:
        return Reply(None if decode is None else decode(response.ext_fields), response.body)
    raise error_for(response, errors)


_CALLS = ("invoke_sync", "invoke_async", "invoke_oneway")


def _calls_are_remotings(endpoint: RemotingEndpoint, target: str | Connection) -> bool:
    """Whether ``endpoint``'s ``invoke_*`` are remoting's own for ``target`` (a
    RemotingClient's for an address, a RemotingServer's for a connection; not a subclass
    that changes a call): those look the connection up and hand the call to the invoker."""
    from .client import RemotingClient
    from .server import RemotingServer

    cls = RemotingClient if isinstance(target, str) else RemotingServer
    return isinstance(endpoint, cls) and all(getattr(type(endpoint), name) is getattr(cls, name) for name in _CALLS)


class Stub:
    """Typed calls to one peer. Subclass it: class attributes that are
    :class:`~.rpc.Method` s are its calls; ``errors`` lists the :class:`~.rpc.ServiceError`
    classes its answers may carry."""

    errors: ClassVar[tuple[type[ServiceError], ...]] = ()
    _methods: ClassVar[dict[str, Method]] = {}
    _error_table: ClassVar[dict[int, type[ServiceError]]] = error_table(())
    _future_classes: ClassVar[dict[Method, type[ReplyFuture]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods: dict[str, Method] = {}
        for klass in reversed(cls.__mro__):
            methods.update((name, value) for name, value in vars(klass).items() if isinstance(value, Method))
        cls._methods = methods
        cls._error_table = error_table(cls.errors)
        cls._future_classes = {method: _reply_future_class(method, cls._error_table) for method in methods.values()}

    def __init__(
        self,
        endpoint: RemotingEndpoint,
        target: str | Connection,
        *,
        timeout: float = 3.0,
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> None:
        """``endpoint``: a RemotingClient (``target``: the server's ``host:port``) or a
        RemotingServer (``target``: one of its connections). ``timeout``: the default
        budget of a call, in seconds. ``serialize_type``: the requests' header
        serialization (answers come in the same). All four are fixed for the stub's
        life (its calls read them once); make another stub for other settings."""
        self.endpoint = endpoint
        self.target = target
        self.address: str = target if isinstance(target, str) else target.remote_address
        self.timeout = timeout
        self.serialize_type = serialize_type
        for name, method in self._methods.items():
            self.__dict__[name] = Call(self, method)  # instance attributes: no descriptor call per use

    def _bind(self, method: Method) -> Call:
        return Call(self, method)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} to {self.address}>"


class Call(Generic[Req, Resp]):
    """A :class:`~.rpc.Method` bound to a :class:`Stub`: call it, or
    :meth:`invoke_async` / :meth:`invoke_oneway` it."""

    __slots__ = (
        "stub", "method", "_code", "_request_cls", "_decode", "_target", "_timeout", "_stype",
        "_sync", "_async", "_oneway", "_is_oneway", "_invoker", "_conns", "_direct", "_future_class",
    )

    def __init__(self, stub: Stub, method: Method[Req, Resp]) -> None:
        self.stub = stub
        self.method = method
        self._code = method.code
        self._request_cls = method.request
        self._decode = method.decode_response
        self._is_oneway = method.oneway
        self._future_class = stub._future_classes.get(method) or _reply_future_class(method, stub._error_table)
        # what every call reads, read once (a stub's endpoint, target and defaults are fixed)
        self._target = stub.target
        self._timeout = stub.timeout
        self._stype = stub.serialize_type
        endpoint = stub.endpoint
        self._sync = endpoint.invoke_sync
        self._async = endpoint.invoke_async
        self._oneway = endpoint.invoke_oneway
        # Where the endpoint's invoke_* are remoting's own (they look the connection up and
        # hand the call to the invoker), the call goes to the invoker itself: a coroutine
        # less per call. A client's open connection to the address comes from its table
        # (else the endpoint's call, which connects); a server calls its connection.
        self._invoker = endpoint.invoker
        self._conns: dict[str, Connection] | None = None
        self._direct: Connection | None = None
        if _calls_are_remotings(endpoint, self._target):
            if isinstance(self._target, str):
                self._conns = endpoint._table  # type: ignore[union-attr]
            else:
                self._direct = self._target

    def _connection(self) -> Connection | None:
        """The connection to hand the call to the invoker on, or None: the endpoint's
        ``invoke_*`` then (connecting first, or another endpoint's calls)."""
        conn = self._direct
        if conn is None and self._conns is not None:
            conn = self._conns.get(self._target)  # type: ignore[arg-type]
            if conn is not None and not conn.is_active:
                return None
        return conn

    async def __call__(self, header: Req, body: bytes = b"", *, timeout: float | None = None) -> Reply[Resp]:
        """The answer to the request (``header``, ``body``); ``None`` for a oneway method."""
        if self._is_oneway:
            await self.invoke_oneway(header, body, timeout=timeout)
            return None  # type: ignore[return-value]
        # the hot path: _make, _connection and reply() written out (each a Python call less per call)
        cls = self._request_cls
        if (header.__class__ is not cls) if cls is not None else (header is not None):
            self._wrong(header)
        request = build_command(RemotingCommand, self._code, _JAVA, 0, 0, 0, None, None, body, header, self._stype)
        budget = self._timeout if timeout is None else timeout
        conn = self._direct  # _connection() written out
        if conn is None and self._conns is not None:
            conn = self._conns.get(self._target)  # type: ignore[arg-type]
            if conn is not None and not conn.is_active:
                conn = None
        if conn is not None:
            response = await self._invoker.sync(conn, request, budget)
        else:
            response = await self._sync(self._target, request, budget)
        if response.code == 0:
            decode = self._decode  # _reply() written out: a Python call less per call
            return Reply(None if decode is None else decode(response.ext_fields), response.body)
        raise error_for(response, self.stub._error_table)

    async def invoke_async(
        self,
        header: Req,
        body: bytes = b"",
        *,
        timeout: float | None = None,
        callback: Callable[[ReplyFuture[Resp]], None] | None = None,
    ) -> ReplyFuture[Resp]:
        """Send the request; returns once it is on its way, with a future of the
        answer (``await`` it, or ``callback(future)`` runs when it is known)."""
        # pipelined calls' hot path: _make and _connection written out, as in __call__
        cls = self._request_cls
        if (header.__class__ is not cls) if cls is not None else (header is not None):
            self._wrong(header)
        request = build_command(RemotingCommand, self._code, _JAVA, 0, 0, 0, None, None, body, header, self._stype)
        budget = self._timeout if timeout is None else timeout
        conn = self._direct
        if conn is None and self._conns is not None:
            conn = self._conns.get(self._target)  # type: ignore[arg-type]
            if conn is not None and not conn.is_active:
                conn = None
        if conn is not None:
            return await self._invoker.call_async(conn, request, budget, callback, None, self._future_class)  # type: ignore[return-value]
        return await self._async(self._target, request, budget, callback, future_class=self._future_class)  # type: ignore[return-value]

    async def invoke_oneway(self, header: Req, body: bytes = b"", *, timeout: float | None = None) -> None:
        """Send the request with the oneway flag: no answer comes."""
        request = self._make(header, body)
        budget = self._timeout if timeout is None else timeout
        conn = self._connection()
        if conn is not None:
            await self._invoker.oneway(conn, request, budget)
        else:
            await self._oneway(self._target, request, budget)

    def _make(self, header: Req, body: bytes) -> RemotingCommand:
        cls = self._request_cls
        if (header.__class__ is not cls) if cls is not None else (header is not None):
            self._wrong(header)
        return build_command(RemotingCommand, self._code, _JAVA, 0, 0, 0, None, None, body, header, self._stype)

    def _wrong(self, header: object) -> NoReturn:
        """Raise the TypeError for a request header that is not the method's."""
        cls = self._request_cls
        expected = "None" if cls is None else f"a {cls.__name__}"
        raise TypeError(f"{self.method!r} takes {expected} as its request header, not {header!r}")

    def reply(self, response: RemotingCommand) -> Reply[Resp]:
        """The :class:`~.rpc.Reply` of a SUCCESS ``response``; else raise its error."""
        return _reply(self._decode, self.stub._error_table, response)

    def __repr__(self) -> str:
        return f"<Call {self.method.name} {self.method!r} of {self.stub!r}>"


class ReplyFuture(ResponseFuture, Generic[Resp]):
    """The pending answer of :meth:`Call.invoke_async`: the call's own
    :class:`~.response.ResponseFuture`, whose :meth:`result` and ``await`` give the
    :class:`~.rpc.Reply` (or raise the stub's error for the answer's code) rather than the
    response command (still there as :attr:`response`).

    Each call a stub declares has its subclass (:func:`_reply_future_class`), holding the
    answer's decode and the stub's error table: the invoker makes it as it makes any
    future, so a typed call's future costs nothing over a plain one's."""

    __slots__ = ()
    _label: ClassVar[str]  # the method's repr (a Method as a class attribute would bind: a descriptor)
    _decode: ClassVar[Callable[[Any], Any] | None]
    _errors: ClassVar[dict[int, type[ServiceError]]]

    def result(self) -> Reply[Resp]:  # type: ignore[override]
        """The reply, or raise the call's error; only once :meth:`done`."""
        if not self._done:
            raise RuntimeError("the call's answer is not known yet")
        if self._error is not None:
            raise self._error
        response = self._response  # _reply() written out: a Python call less per answer
        if response.code == 0:  # type: ignore[union-attr]
            decode = self._decode
            return Reply(None if decode is None else decode(response.ext_fields), response.body)  # type: ignore[union-attr]
        raise error_for(response, self._errors)  # type: ignore[arg-type]

    async def wait(self) -> Reply[Resp]:  # type: ignore[override]
        """Wait for the answer (at most until the deadline) and return the reply."""
        return _reply(self._decode, self._errors, await ResponseFuture.wait(self))

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("error" if self._error else "done")
        return f"<ReplyFuture of {self._label} opaque={self.opaque} {state} to {self.address}>"


def _reply_future_class(method: Method, errors: dict[int, type[ServiceError]]) -> type[ReplyFuture]:
    """The :class:`ReplyFuture` subclass of ``method`` as a stub with ``errors`` declares it."""
    decode = method.decode_response  # a function (the pure codec's) would bind as a method: static
    attributes = {
        "__slots__": (), "_label": repr(method), "_errors": errors,
        "_decode": None if decode is None else staticmethod(decode),
    }
    return type(f"ReplyFuture[{method.name}]", (ReplyFuture,), attributes)
