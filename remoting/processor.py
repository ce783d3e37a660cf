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
connection while they run); limits do not apply to them.
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Protocol, Union

import attrs
import trio

from trocket.codecs.command import RemotingCommand

__all__ = ["RequestProcessor", "ProcessorEntry", "ProcessorRegistry", "Processor"]


class RequestProcessor(Protocol):
    async def process_request(self, conn: Any, request: RemotingCommand) -> RemotingCommand | None: ...

    def reject_request(self) -> bool: ...


Processor = Union[
    RequestProcessor,
    Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]],
    Callable[[Any, RemotingCommand], RemotingCommand | None],
]


@attrs.define(slots=True, eq=False)
class ProcessorEntry:
    """One registration. ``pending`` counts requests admitted and not yet finished
    (running plus queued), across all connections of the endpoint."""

    call: Callable[..., Any]
    is_async: bool
    limit: int
    queue: int
    inline: bool
    reject: Callable[[], bool] | None
    limiter: trio.CapacityLimiter
    pending: int = 0

    @property
    def capacity(self) -> int:
        return self.limit + self.queue


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
        self._entries: dict[int, ProcessorEntry] = {}
        self.default: ProcessorEntry | None = None

    def _entry(
        self, processor: Processor, limit: int | None, queue: int | None, inline: bool
    ) -> ProcessorEntry:
        call = getattr(processor, "process_request", processor)
        reject = getattr(processor, "reject_request", None)
        if not callable(call):
            raise TypeError(f"processor {processor!r} is not callable and has no process_request")
        limit = self._default_limit if limit is None else limit
        queue = self._default_queue if queue is None else queue
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
        )

    def register(
        self,
        code: int,
        processor: Processor,
        *,
        limit: int | None = None,
        queue: int | None = None,
        inline: bool = False,
    ) -> ProcessorEntry:
        entry = self._entry(processor, limit, queue, inline)
        self._entries[code] = entry
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

    def lookup(self, code: int) -> ProcessorEntry | None:
        entry = self._entries.get(code)
        return self.default if entry is None else entry

    def codes(self) -> list[int]:
        return sorted(self._entries)
