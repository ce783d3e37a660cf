"""Pending calls: :class:`ResponseFuture` and the per-connection :class:`ResponseTable`.

Every call ends with exactly one outcome: a response, a timeout, a connection
failure, or a cancellation. The first one to arrive wins (:meth:`ResponseFuture._finish`
is idempotent); whoever wins removes the future from its table, releases its
async permit and runs the callback, so a late response finds no entry and is
dropped (and counted by the connection), never delivered.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

import trio

from trocket.codecs.command import RemotingCommand

from .deadlines import _Slot, _Wheel, schedule, wheel
from .errors import RemotingCancelledError, RemotingError, RemotingTimeoutError

__all__ = ["ResponseFuture", "ResponseTable", "InvokeCallback"]

log = logging.getLogger(__name__)

InvokeCallback = Callable[["ResponseFuture"], None]


class ResponseFuture:
    """The pending response to one request, awaitable (``await fut``).

    Awaiting waits until the outcome or the call's deadline, whichever comes first;
    an awaiter that is cancelled cancels the call (its opaque and permit are freed).
    A call nobody awaits (its callback is all its caller waits for) is expired by the
    endpoint's periodic scan, or at its deadline after :meth:`enforce_deadline`.
    ``callback(fut)``, if given, runs once, synchronously, when the outcome is known:
    keep it short and non-blocking (it runs on the connection's reader, or in the
    task that timed out or cancelled the call).
    """

    __slots__ = (
        "opaque",
        "request",
        "address",
        "timeout",
        "begin",
        "deadline",
        "callback",
        "_table",
        "_permit",
        "_hooks",
        "_waiters",
        "_slot",
        "_response",
        "_error",
        "_done",
    )

    def __init__(
        self,
        opaque: int,
        request: RemotingCommand,
        address: str | None,
        timeout: float,
        table: ResponseTable | None = None,
        *,
        permit: trio.Semaphore | None = None,
        callback: InvokeCallback | None = None,
        hooks: tuple = (),
        begin: float | None = None,
    ) -> None:
        self.opaque = opaque
        self.request = request
        self.address = address
        self.timeout = timeout
        self.begin = trio.current_time() if begin is None else begin
        self.deadline = self.begin + timeout
        self.callback = callback
        self._table = table
        self._permit = permit
        self._hooks = hooks
        self._waiters: list[trio.lowlevel.Task] | None = None
        self._slot: _Slot | None = None  # deadline wheel slot while awaited or enforced
        self._response: RemotingCommand | None = None
        self._error: BaseException | None = None
        self._done = False

    # -- state ------------------------------------------------------------------------

    def done(self) -> bool:
        return self._done

    def result(self) -> RemotingCommand:
        """The response, or raise the call's error; only once :meth:`done`."""
        if not self._done:
            raise RuntimeError("the response future is not done yet")
        if self._error is not None:
            raise self._error
        return self._response  # type: ignore[return-value]

    @property
    def response(self) -> RemotingCommand | None:
        return self._response

    @property
    def exception(self) -> BaseException | None:
        return self._error

    @property
    def elapsed(self) -> float:
        return trio.current_time() - self.begin

    # -- outcomes ---------------------------------------------------------------------

    def set_response(self, response: RemotingCommand) -> bool:
        if self._done:
            return False
        for hook in self._hooks:
            try:
                hook.do_after_response(self.address, self.request, response)
            except Exception as exc:  # a hook's verdict becomes the call's outcome
                return self._finish(None, exc)
        return self._finish(response, None)

    def set_exception(self, error: BaseException) -> bool:
        return self._finish(None, error)

    def expire(self) -> bool:
        """End the call as timed out (the awaiter's deadline or the periodic scan)."""
        if self._done:
            return False
        elapsed = trio.current_time() - self.begin
        return self._finish(None, RemotingTimeoutError(self.address, elapsed, self.timeout))

    def enforce_deadline(self) -> None:
        """Expire the call at its deadline (at most the deadline wheel's 5 ms late)
        though nobody awaits it, instead of at the next periodic scan. Awaiting does
        this by itself."""
        if not self._done and self._slot is None:
            schedule(self)

    def cancel(self) -> bool:
        """Cancel the call: free its opaque and permit; a later response is dropped."""
        if self._done:
            return False
        return self._finish(
            None, RemotingCancelledError(f"call {self.opaque} cancelled", self.address)
        )

    def _finish(self, response: RemotingCommand | None, error: BaseException | None) -> bool:
        if self._done:
            return False
        self._done = True
        self._response = response
        self._error = error
        table = self._table
        if table is not None:
            table.pop(self.opaque)
        permit = self._permit
        if permit is not None:
            self._permit = None
            permit.release()
        slot = self._slot
        if slot is not None:
            slot.leave(self)
        waiters = self._waiters
        if waiters:
            self._waiters = None
            for task in waiters:
                trio.lowlevel.reschedule(task)
        callback = self.callback
        if callback is not None:
            try:
                callback(self)
            except Exception:
                log.exception("invoke callback for opaque %d raised", self.opaque)
        return True

    # -- waiting ----------------------------------------------------------------------

    async def wait(self) -> RemotingCommand:
        """Wait for the outcome (at most until the deadline) and return the response."""
        if not self._done:
            task = trio.lowlevel.current_task()
            if self._waiters is None:
                self._waiters = [task]
                # the deadline wheel expires the call (see .deadlines); the table keeps
                # the run's wheel (a look-up is three Python calls)
                table = self._table
                if table is None:
                    schedule(self)
                else:
                    on = table.wheel
                    if on is None:
                        on = table.wheel = wheel()
                    on.add(self)
            else:
                self._waiters.append(task)

            def abort(_raise_cancel) -> trio.lowlevel.Abort:
                if self._waiters is not None and task in self._waiters:
                    self._waiters.remove(task)
                self.cancel()  # an awaiter cancelled: the call is cancelled
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        else:
            await trio.lowlevel.checkpoint()
        if self._error is not None:
            raise self._error
        return self._response  # type: ignore[return-value]

    def __await__(self):
        return self.wait().__await__()

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("error" if self._error else "done")
        return f"<ResponseFuture opaque={self.opaque} {state} to {self.address}>"


class ResponseTable:
    """The calls pending on one connection, keyed by opaque; used only through these
    methods (the invoker adds, the reader and a finishing future pop; a waiting future
    schedules itself on :attr:`wheel`)."""

    __slots__ = ("_futures", "wheel")

    def __init__(self) -> None:
        self._futures: dict[int, ResponseFuture] = {}
        #: the deadline wheel of the run its connection lives in, once a call waited
        self.wheel: _Wheel | None = None

    def __len__(self) -> int:
        return len(self._futures)

    def __contains__(self, opaque: int) -> bool:
        return opaque in self._futures

    def add(self, future: ResponseFuture) -> None:
        """Register a call under its opaque (a later call with the same opaque replaces it)."""
        self._futures[future.opaque] = future

    def pop(self, opaque: int) -> ResponseFuture | None:
        """Remove and return the call with ``opaque``; None if there is none (late or unknown)."""
        return self._futures.pop(opaque, None)

    def futures(self) -> Iterable[ResponseFuture]:
        return list(self._futures.values())

    def fail_all(self, error_factory: Callable[[ResponseFuture], RemotingError]) -> int:
        """Fail every pending call at once (the connection is gone)."""
        futures = list(self._futures.values())
        for fut in futures:
            fut.set_exception(error_factory(fut))
        return len(futures)

    def expire(self, now: float) -> int:
        """Time out every call whose deadline has passed; returns how many."""
        expired = [f for f in self._futures.values() if f.deadline <= now]
        for fut in expired:
            fut.expire()
        return len(expired)
