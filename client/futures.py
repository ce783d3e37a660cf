"""The outcome of a call made without waiting: :class:`SendFuture` (``send_async``), the
base of request-reply's :class:`~trocket.client.request_reply.RequestFuture`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from .errors import ClientStateError
from .message import SendResult

__all__ = ["SendFuture"]

log = logging.getLogger(__name__)


class SendFuture:
    """The outcome of :meth:`Producer.send_async`: ``await fut`` (or ``await fut.wait()``)
    returns the :class:`SendResult` or raises the send's error; ``fut.done()``,
    ``fut.result()`` once done. The optional callback gets ``(result, error)``."""

    __slots__ = ("_done", "_event", "_result", "_error", "_callback")

    def __init__(self, callback: Callable[[SendResult | None, BaseException | None], Any] | None = None) -> None:
        self._done = False
        self._event: trio.Event | None = None  # made only for a waiter (most sends have none)
        self._result: SendResult | None = None
        self._error: BaseException | None = None
        self._callback = callback

    def _finish(self, result: SendResult | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._done = True
        if self._event is not None:
            self._event.set()
        if self._callback is not None:
            try:
                self._callback(result, error)
            except Exception:  # the caller's bug: reported, never the send's outcome
                log.exception("send callback raised")

    def done(self) -> bool:
        return self._done

    def result(self) -> SendResult:
        if not self._done:
            raise ClientStateError("the send is not finished")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def exception(self) -> BaseException | None:
        return self._error

    async def wait(self) -> SendResult:
        if not self._done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        else:
            await trio.lowlevel.checkpoint()
        return self.result()

    def __await__(self):
        return self.wait().__await__()
