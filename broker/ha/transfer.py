"""GroupTransferService: SYNC_MASTER sends wait here for a slave's acknowledgement
(RocketMQ 4.9.1's ``HAService.GroupTransferService``, non-blocking as 4.7's
``CommitLog.submitReplicaRequest``).

The send path calls :meth:`GroupTransferService.submit` with the message's end offset
and a callback, and returns: it never awaits. Submissions go to a write list; the
service swaps the two lists (4.9.1's double buffer: producers append to one while the
service drains the other, nothing held across an await) and keeps the requests in
arrival order, which is commit-log order. Each acknowledgement from the slave
(:meth:`notify_acked`, called by the HA connection's reader) runs a pass right there
-- no task switch between the acknowledgement and the answers -- completing, in order,
every request whose end the acknowledged offset covers: many per acknowledgement, then
calls the pass listeners (the send processor writes the answers the pass completed,
one write per connection). The service's own task only wakes for deadlines: a pass at
the first request's deadline times out those past it (``syncFlushTimeout``).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

import trio

__all__ = ["GroupTransferService", "TransferRequest"]

log = logging.getLogger(__name__)


#: a request: (end, deadline, done, arg) -- a plain tuple, one per SYNC send (an object
#: with named fields costs several times as much to make). ``end``: the offset just past
#: the message (batch) that must reach the slave; ``deadline``: trio time after which it
#: is answered FLUSH_SLAVE_TIMEOUT; ``done(arg, ok)`` is called once, True
#: (acknowledged) or False (timed out).
TransferRequest = tuple[int, float, Callable[[Any, bool], None], Any]
_END = 0
_DEADLINE = 1


class GroupTransferService:
    def __init__(self, *, timeout: float, fallbehind_max: int) -> None:
        self.timeout = timeout
        self.fallbehind_max = fallbehind_max
        #: highest offset a slave acknowledged (``push2SlaveMaxOffset``)
        self.acked = 0
        #: slaves connected now (trocket's master takes one)
        self.connections = 0
        self._write: list[TransferRequest] = []
        self._read: list[TransferRequest] = []
        self._pending: deque[TransferRequest] = deque()
        #: the run's clock (trio.current_time() is three Python calls to it), set by :meth:`run`
        self._now: Callable[[], float] = trio.current_time
        self._wakeup = trio.Event()
        #: the service sleeps with nothing pending: a submission must wake it (otherwise it
        #: sleeps until the first deadline, which is earlier than any new one)
        self._idle = False
        #: called after every pass that completed requests (no arguments)
        self._pass_listeners: tuple[Callable[[], None], ...] = ()
        #: acknowledgements that completed at least one request, and requests completed
        self.acks_used = 0
        self.completed = 0
        self.timed_out = 0

    # -- the send path (synchronous, cheap) ------------------------------------------------

    def slave_ok(self, master_put_where: int) -> bool:
        """``HAService.isSlaveOK``: a slave is connected and lags less than
        ``haSlaveFallbehindMax`` behind ``master_put_where``."""
        return self.connections > 0 and master_put_where - self.acked < self.fallbehind_max

    def submit(self, end: int, done: Callable[[Any, bool], None], arg: Any = None) -> None:
        """Hand over a request; ``done(arg, ok)`` is called later, from the pass of an
        acknowledgement or of the service's deadline (a function and its argument: no
        closure made per send)."""
        if self._idle:
            self._idle = False
            self._wakeup.set()  # the service sleeps with no deadline: give it one
        self._write.append((end, self._now() + self.timeout, done, arg))

    def add_pass_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` at the end of every pass that completed requests: what
        their callbacks queued can go out together."""
        self._pass_listeners += (listener,)

    # -- the HA connection -----------------------------------------------------------------

    def notify_acked(self, offset: int) -> None:
        """The slave holds everything below ``offset``: complete what it covers now."""
        if offset > self.acked:
            self.acked = offset
            self._swap()
            self._complete()

    def reset_acked(self, offset: int) -> None:
        """A (new) slave starts at ``offset``."""
        self.acked = offset

    # -- the service -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._now = trio.lowlevel.current_clock().current_time
        task_status.started()
        try:
            while True:
                self._swap()
                self._complete()
                pending = self._pending
                if pending:
                    await trio.sleep_until(pending[0][_DEADLINE])
                else:
                    self._idle = True
                    await self._wakeup.wait()
                    self._wakeup = trio.Event()
        finally:
            self._swap()
            if _complete_through(self._pending, _END, float("inf"), False):
                self._after_pass()

    def _swap(self) -> None:
        self._write, self._read = self._read, self._write
        self._pending.extend(self._read)
        self._read.clear()

    def _complete(self) -> None:
        pending = self._pending
        if not pending:
            return
        n = 0
        if pending[0][_END] <= self.acked:
            n = _complete_through(pending, _END, self.acked, True)
            self.acks_used += 1
            self.completed += n
        if pending and pending[0][_DEADLINE] <= (now := self._now()):
            late = _complete_through(pending, _DEADLINE, now, False)
            self.timed_out += late
            n += late
        if n:
            self._after_pass()

    def _after_pass(self) -> None:
        for listener in self._pass_listeners:
            try:
                listener()
            except Exception:
                log.exception("transfer pass listener failed")

    @property
    def waiting(self) -> int:
        return len(self._pending) + len(self._write)


def _complete_through(pending: deque[TransferRequest], field: int, limit: float, ok: bool) -> int:
    """Take the requests at the front of ``pending`` whose ``field`` (end offset or
    deadline: both grow along the queue) is at most ``limit`` and call ``done(arg, ok)``
    of each, in order; returns how many. One that raises is logged and the others
    still complete."""
    before = len(pending)
    while pending and pending[0][field] <= limit:
        try:
            while pending and pending[0][field] <= limit:
                _, _, done, arg = pending.popleft()
                done(arg, ok)
        except Exception:
            log.exception("transfer completion callback failed")
    return before - len(pending)
