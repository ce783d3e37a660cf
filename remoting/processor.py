"""Request processors: per-code registration, concurrency limit, bounded queue.

A processor is either

- an async callable ``async def (conn, request) -> RemotingCommand | None``, or
- a plain callable ``def (conn, request) -> RemotingCommand | None`` (a *blocking*
  processor: it runs in a worker thread), or
- an object with such a ``process_request`` method and, optionally,
  ``reject_request() -> bool`` (RocketMQ's ``NettyRequestProcessor``: ``True``
  answers SYSTEM_BUSY at once, for flow control).

Returning ``None`` sends no response (the processor may answer later with
:meth:`Connection.answer`, e.g. from a handler task started with
:meth:`Connection.start_handler`, as RocketMQ's long polling does).

Each registration has a ``limit`` (requests processed at once) and a ``queue``
(requests admitted to wait beyond that). A request past both is answered
SYSTEM_BUSY at once, never queued without bound. ``inline=True`` runs the
processor on the connection's reader itself, without a task or a thread: for
processors that never block (they also hold up every later frame of that
connection while they run). An inline processor's answer is ready when it returns,
unless it answers later (returns ``None`` for a two-way request): such requests count
as pending until :meth:`Connection.answer` sends their answer or the connection
closes, and with a ``limit`` or ``queue`` given, a request past ``limit + queue``
pending ones is answered SYSTEM_BUSY at once (an inline registration without either
is not bounded: it bounds its own later answers).

One registration can serve several codes (``codes`` an iterable): they share its
limits and its count of pending requests.

A processor that raises :class:`~trocket.remoting.errors.ResponseCodeError` is
answered with the error's code and remark; anything else it raises is answered
SYSTEM_ERROR (RocketMQ's ``exceptionSimpleDesc`` remark) and logged.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, Union

import attrs
import trio

from trocket.codecs.command import RemotingCommand

if TYPE_CHECKING:
    from .connection import Connection
    from .replies import PreparedResponse

#: what a processor may return: the answer, or None (oneway, or answered later)
Answer = Union[RemotingCommand, "PreparedResponse", None]

__all__ = ["RequestProcessor", "ProcessorEntry", "ProcessorRegistry", "Processor"]


class RequestProcessor(Protocol):
    async def process_request(self, conn: Connection, request: RemotingCommand) -> Answer: ...

    def reject_request(self) -> bool: ...


Processor = Union[
    RequestProcessor,
    Callable[["Connection", RemotingCommand], Awaitable[Answer]],
    Callable[["Connection", RemotingCommand], Answer],
]


@attrs.define(slots=True, eq=False)
class ProcessorEntry:
    """One registration. ``pending`` counts requests admitted and not yet finished
    (running plus queued; for an inline processor, the ones it answers later), across
    all connections of the endpoint; past ``capacity`` a request is answered SYSTEM_BUSY."""

    call: Callable[..., Any]
    is_async: bool
    limit: int
    queue: int
    inline: bool
    reject: Callable[[], bool] | None
    limiter: trio.CapacityLimiter
    #: requests admitted at once (``limit + queue``; unbounded for an inline
    #: registration that gave neither)
    capacity: float = math.inf
    pending: int = 0
    #: inline, synchronous, no ``reject_request``: the reader runs it with no coroutine
    inline_sync: bool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.inline_sync = self.inline and not self.is_async and self.reject is None


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


class ProcessorRegistry:
    """Code -> :class:`ProcessorEntry`, plus an optional default processor."""

    def __init__(self, default_limit: int, default_queue: int) -> None:
        self._default_limit = default_limit
        self._default_queue = default_queue
        #: code -> registration (read directly by the endpoint's dispatch: no call per request)
        self.by_code: dict[int, ProcessorEntry] = {}
        self.default: ProcessorEntry | None = None

    def _entry(
        self, processor: Processor, limit: int | None, queue: int | None, inline: bool
    ) -> ProcessorEntry:
        call = getattr(processor, "process_request", processor)
        reject = getattr(processor, "reject_request", None)
        if not callable(call):
            raise TypeError(f"processor {processor!r} is not callable and has no process_request")
        bounded = not inline or limit is not None or queue is not None
        limit = self._default_limit if limit is None else limit
        queue = (self._default_queue if not inline else 0) if queue is None else queue
        if limit <= 0 or queue < 0:
            raise ValueError("a processor needs limit > 0 and queue >= 0")
        return ProcessorEntry(
            call=call,
            is_async=_is_async(call),
            limit=limit,
            queue=queue,
            inline=inline,
            reject=reject,
            limiter=trio.CapacityLimiter(limit),
            capacity=limit + queue if bounded else math.inf,
        )

    def register(
        self,
        codes: int | Iterable[int],
        processor: Processor,
        *,
        limit: int | None = None,
        queue: int | None = None,
        inline: bool = False,
    ) -> ProcessorEntry:
        """Route ``codes`` (one or several, sharing the registration) to ``processor``."""
        entry = self._entry(processor, limit, queue, inline)
        for code in (codes,) if isinstance(codes, int) else codes:
            self.by_code[int(code)] = entry
        return entry

    def register_default(
        self,
        processor: Processor,
        *,
        limit: int | None = None,
        queue: int | None = None,
        inline: bool = False,
    ) -> ProcessorEntry:
        self.default = self._entry(processor, limit, queue, inline)
        return self.default

    def view(self, exclude: Iterable[int] = ()) -> ProcessorRegistry:
        """A registry serving the same registrations (the same entries: their limits and
        counts are shared) but for the codes in ``exclude``: what a second listener of
        one service serves (RocketMQ's VIP channel, all but PULL_MESSAGE). A snapshot:
        codes registered here later do not reach it."""
        other = ProcessorRegistry(self._default_limit, self._default_queue)
        excluded = {int(code) for code in exclude}
        other.by_code = {code: entry for code, entry in self.by_code.items() if code not in excluded}
        other.default = self.default
        return other

    def lookup(self, code: int) -> ProcessorEntry | None:
        entry = self.by_code.get(code)
        return self.default if entry is None else entry

    def codes(self) -> list[int]:
        return sorted(self.by_code)
